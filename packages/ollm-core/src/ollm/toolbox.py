"""The ``toolbox`` tool pack: small, safe tools that work out of the box.

It is an ordinary plugin (entry point ``toolbox`` of the group ``ollm.plugins``), and
a short example of how a third party ships a tool pack::

    ollm chat -t current_time -t calculate "What is 17% of 2,340 and what time is it?"
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

import msgspec

from ollm.hookspecs import hookimpl

__all__ = ["calculate", "current_time", "ollm_tools"]


def current_time(
    utc_offset_hours: Annotated[float, msgspec.Meta(ge=-14, le=14)] | None = None,
) -> str:
    """Get the current date and time.

    Args:
        utc_offset_hours: Hours from UTC for the time zone wanted (for example -5 or 5.5);
            leave it out for the local time of the machine.
    """
    if utc_offset_hours is None:
        now = datetime.now().astimezone()
    else:
        now = datetime.now(timezone(timedelta(hours=utc_offset_hours)))
    return now.strftime("%A %d %B %Y, %H:%M:%S (UTC%z)")


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "floor": math.floor,
    "ceil": math.ceil,
    "factorial": math.factorial,
    "radians": math.radians,
    "degrees": math.degrees,
}
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_MAX_LENGTH = 500
_MAX_DEPTH = 300  # above what 500 characters can nest; below Python's recursion limit
#: Every integer, intermediate ones included, stays below 10**4000: each operation is
#: checked *before* it runs, so none can hold the interpreter for long.
_MAX_DIGITS = 4000
_MAX_BITS = int(_MAX_DIGITS * math.log2(10))
_MAX_FACTORIAL = 1000
_MAX_ROUND_DIGITS = 1000
#: Every character an expression can hold: digits, names (of functions and constants,
#: and exponents as in 1e-5), operators, parentheses, the decimal point, commas and
#: spaces. Stated in the schema, so a model constrained by it (a llama.cpp grammar)
#: cannot write "17 * 23 = 391", and one that is not is told before the tool runs.
_EXPRESSION_PATTERN = r"^[0-9A-Za-z+\-*/%^()., ]*$"
#: A comma followed by exactly three digits, after a digit: "2,340", "1,234,567".
_GROUP = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def calculate(expression: Annotated[str, msgspec.Meta(pattern=_EXPRESSION_PATTERN)]) -> str:
    """Evaluate an arithmetic expression exactly as written, and return the result.

    Supports + - * / // % ** (or ^) and parentheses, the functions sqrt, exp, log,
    log10, log2, sin, cos, tan, asin, acos, atan, floor, ceil, round, abs, min, max,
    factorial, radians and degrees, and the constants pi, e and tau. ``log(x)`` is the
    natural logarithm and ``log(x, base)`` the logarithm in that base; ``round(x, n)``
    keeps n decimals. Percentages are written as fractions (17% of 2340 is
    0.17 * 2340). Thousands separators ("2,340") are understood outside function
    calls; inside a call's parentheses a comma always separates arguments, so write
    ``max(2340, 5)``. Integers are limited to 4000 digits and factorial to 1000.

    Args:
        expression: The expression, for example "(3 + 4.5) * 2 ** 3".
    """
    text = expression.strip().replace("^", "**")
    if len(text) > _MAX_LENGTH:
        raise ValueError(f"the expression is longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(_drop_thousands_separators(text), mode="eval")
    except (SyntaxError, MemoryError, RecursionError):
        raise ValueError(f"{expression!r} is not a valid arithmetic expression") from None
    value = _evaluate(tree.body, 0)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return str(value)


def _drop_thousands_separators(text: str) -> str:
    """Remove the commas that group digits, outside the parentheses of a call.

    A parenthesis opened right after a name is a call's (its commas separate
    arguments); any other parenthesis only groups, so "(2,340 + 1)" is 2341 while
    "max(10,250,3)" is max(10, 250, 3).
    """
    if "," not in text:
        return text
    out: list[str] = []
    calls: list[bool] = []  # for each open parenthesis: is it a call's?
    start = 0
    for index, char in enumerate(text):
        if char == "(":
            before = text[:index].rstrip()
            calls.append(bool(before) and (before[-1].isalnum() or before[-1] == "_"))
        elif char == ")":
            if calls:
                calls.pop()
        elif char == "," and not (calls and calls[-1]) and _GROUP.match(text, index):
            out.append(text[start:index])
            start = index + 1
    out.append(text[start:])
    return "".join(out)


def _evaluate(node: ast.AST, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise ValueError(f"the expression is nested more than {_MAX_DEPTH} levels deep")
    depth += 1
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        if isinstance(node.value, bool):
            raise ValueError("booleans are not numbers here")
        return _checked(node.value)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left, depth), _evaluate(node.right, depth)
        _check_binary(node.op, left, right)
        return _apply(_BINARY[type(node.op)], left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand, depth))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        name = node.func.id
        args = [_evaluate(arg, depth) for arg in node.args]
        _check_call(name, args)
        return _apply(_FUNCTIONS[name], *args, name=name)
    if isinstance(node, ast.Tuple):
        raise ValueError(
            "a comma outside a function call: write numbers without separators"
            " (2340) or group digits by three (2,340)"
        )
    what = type(node).__name__
    if isinstance(node, ast.Name):
        what = f"the name {node.id!r}"
    raise ValueError(f"{what} is not allowed in an arithmetic expression")


def _check_binary(op: ast.operator, left: Any, right: Any) -> None:
    """Refuse an operation whose integer result would pass the limit, before it runs."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return  # floats overflow (an error) instead of growing
    # Products, sums and quotients of bounded integers are quick, and checked after;
    # only a power can grow past any bound in one step.
    growing = isinstance(op, ast.Pow) and right > 0 and left not in (0, 1, -1)
    if growing and right * max(left.bit_length() - 1, 1) > _MAX_BITS:
        raise ValueError(f"the result would have more than {_MAX_DIGITS} digits")


def _check_call(name: str, args: list[Any]) -> None:
    first = args[0] if args else 0
    if name == "factorial" and isinstance(first, (int, float)) and first > _MAX_FACTORIAL:
        raise ValueError(f"factorial is limited to {_MAX_FACTORIAL}")
    places = args[1] if len(args) == 2 else 0
    if name == "round" and isinstance(places, int) and abs(places) > _MAX_ROUND_DIGITS:
        raise ValueError(f"round keeps at most {_MAX_ROUND_DIGITS} digits")


def _apply(function: Callable[..., Any], *args: Any, name: str | None = None) -> Any:
    try:
        value = function(*args)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError("the result is too large for a number") from None
    except (TypeError, ValueError) as exc:
        where = f"{name}(): " if name else ""
        raise ValueError(f"{where}{exc}") from None
    return _checked(value)


def _checked(value: Any) -> Any:
    if isinstance(value, complex):
        raise ValueError("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("the result is too large for a number")
    if isinstance(value, int) and value.bit_length() > _MAX_BITS + 1:
        raise ValueError(f"the result would have more than {_MAX_DIGITS} digits")
    return value


@hookimpl
def ollm_tools() -> list[Callable[..., Any]]:
    """The toolbox's tools."""
    return [current_time, calculate]
