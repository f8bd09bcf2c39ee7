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
_MAX_EXPONENT = 10_000
_MAX_FACTORIAL = 1_000
_MAX_LENGTH = 500
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression exactly as written, and return the result.

    Supports + - * / // % ** and parentheses, the functions sqrt, exp, log, log10,
    log2, sin, cos, tan, asin, acos, atan, floor, ceil, round, abs, min, max,
    factorial, radians and degrees, and the constants pi, e and tau. Percentages
    are written as fractions (17% of 2340 is 0.17 * 2340).

    Args:
        expression: The expression, for example "(3 + 4.5) * 2 ** 3".
    """
    # "2,340" is a thousands separator; "round(x, 2)" is an argument list.
    text = _THOUSANDS.sub("", expression.strip().replace("^", "**"))
    if len(text) > _MAX_LENGTH:
        raise ValueError(f"the expression is longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"{expression!r} is not a valid arithmetic expression") from None
    value = _evaluate(tree.body)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return str(value)


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        if isinstance(node.value, bool):
            raise ValueError("booleans are not numbers here")
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError(f"exponents above {_MAX_EXPONENT} are not allowed")
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        args = [_evaluate(arg) for arg in node.args]
        if node.func.id == "factorial" and args and args[0] > _MAX_FACTORIAL:
            raise ValueError(f"factorial is limited to {_MAX_FACTORIAL}")
        return _FUNCTIONS[node.func.id](*args)
    name = type(node).__name__
    if isinstance(node, ast.Name):
        name = f"the name {node.id!r}"
    raise ValueError(f"{name} is not allowed in an arithmetic expression")


@hookimpl
def ollm_tools() -> list[Callable[..., Any]]:
    """The toolbox's tools."""
    return [current_time, calculate]
