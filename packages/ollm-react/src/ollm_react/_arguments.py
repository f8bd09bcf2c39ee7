"""Read a model's Action Input: fences, JSON, Python literals, plain strings.

``decode_input`` takes the text after ``Action Input:`` (or an inline call's
parentheses) and returns what it holds; ``arguments_for`` then checks it against the
tool's schema. The order follows react-guide.md: strip code fences, decode the first
JSON object and ignore trailing prose (``raw_decode``), else try a Python-literal
dict (single quotes, trailing commas, ``True``), and accept a plain string only for a
tool with exactly one required string parameter.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from ollm_react._markers import is_fence_line
from ollm_react._schema import schema_problem, single_string_parameter

__all__ = [
    "EMPTY",
    "Balance",
    "Decoded",
    "arguments_for",
    "call_opening",
    "decode_call",
    "decode_input",
]

_MAX_LITERAL = 50_000
_NO_VALUE = ("", "none", "null", "{}", "n/a", "nothing", "no input", "()")


class _Empty:
    """No input at all (``Action Input:`` left blank, ``None``, ``{}``)."""

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY: Any = _Empty()


class Decoded:
    """What an Action Input holds: a value, or the problem that kept it from decoding."""

    __slots__ = ("problem", "value")

    def __init__(self, value: Any = None, problem: str | None = None) -> None:
        self.value = value
        self.problem = problem


class Balance:
    """Finds where a bracketed value closes, knowing JSON and Python string quoting.

    ``opening`` lists the characters that may start the value (``{`` for an Action
    Input, ``{`` and ``(`` for an inline call). Feed text in any chunks; ``closed``
    turns true at the bracket that balances the first one.
    """

    __slots__ = ("_escape", "_quote", "closed", "depth", "opening", "started")

    def __init__(self, opening: str = "{") -> None:
        self.opening = opening
        self.started = False
        self.closed = False
        self.depth = 0
        self._quote = ""
        self._escape = False

    def feed(self, text: str) -> int:
        """Consume ``text``; the index just past the closing bracket, or -1."""
        start = 0
        if not self.started:
            first = min((i for i in (text.find(c) for c in self.opening) if i >= 0), default=-1)
            if first < 0:
                return -1
            self.started = True
            start = first
        for index in range(start, len(text)):
            char = text[index]
            if self._quote:
                if self._escape:
                    self._escape = False
                elif char == "\\":
                    self._escape = True
                elif char == self._quote:
                    self._quote = ""
            elif char in "\"'":
                self._quote = char
            elif char in "{([":
                self.depth += 1
            elif char in "})]":
                self.depth -= 1
                if self.depth <= 0:
                    self.closed = True
                    return index + 1
        return -1


_CALL_OPENING = re.compile(r"(?<=[\w.`*'\"\]-])\(|\{")


def call_opening(action: str) -> int:
    """Where an inline call's arguments start on an Action line: ``name(`` or ``{``.

    A parenthesis after a space is prose (``search (to find it)``), not a call.
    """
    match = _CALL_OPENING.search(action)
    return match.start() if match else -1


def balanced_end(text: str, start: int, opening: str = "{") -> int:
    """The end of the bracketed value that begins at ``text[start]``, or -1."""
    return Balance(opening).feed(text[start:]) + start if start >= 0 else -1


def strip_fences(text: str) -> str:
    """The text without code-fence lines and without inline backticks around it."""
    lines = [line for line in text.split("\n") if not is_fence_line(line)]
    body = "\n".join(lines).strip()
    if len(body) >= 2 and body[0] == "`" and body[-1] == "`":
        body = body.strip("`").strip()
    return body


def decode_input(text: str) -> Decoded:
    """What an Action Input holds, without looking at any schema."""
    body = strip_fences(text)
    start = body.find("{")
    if start >= 0:
        return _decode_object(body, start)
    first = next((line.strip() for line in body.split("\n") if line.strip()), "")
    if first.lower().rstrip(".") in _NO_VALUE:
        return Decoded(EMPTY)
    if first.startswith('"'):
        try:
            value, _ = _DECODER.raw_decode(first)
        except (ValueError, RecursionError):
            value = first.strip('"')
        return Decoded(value)
    if first.startswith("["):
        return Decoded(problem="Action Input must be a JSON object, not a list")
    return Decoded(first.strip("'`*").strip())


def decode_call(text: str) -> Decoded:
    """The arguments of an inline call: ``({"q": "a"})``, ``(q="a")`` or ``("a")``."""
    body = text.strip()
    if body.startswith("{"):
        return _decode_object(body, 0)
    inner = body[1:]
    stripped = inner.lstrip()
    if stripped.startswith("{"):
        return _decode_object(stripped, 0)
    end = balanced_end(body, 0, "(")
    if end < 0:
        return Decoded(problem="the call's parentheses are not closed")
    if end - 2 <= 0 or not body[1 : end - 1].strip():
        return Decoded(EMPTY)
    if end > _MAX_LITERAL:
        return Decoded(problem="the call's arguments are too long")
    try:
        tree = ast.parse("f" + body[:end], mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return Decoded(problem="the call's arguments are not valid: write them as one JSON object")
    call = tree.body
    if not isinstance(call, ast.Call):
        return Decoded(problem="the call's arguments are not valid: write them as one JSON object")
    try:
        if call.keywords and not call.args:
            args: dict[str, Any] = {}
            for keyword in call.keywords:
                if keyword.arg is None:
                    raise ValueError("no ** in arguments")
                args[keyword.arg] = _literal(keyword.value)
            return Decoded(args)
        if len(call.args) == 1 and not call.keywords:
            return Decoded(_literal(call.args[0]))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    return Decoded(problem="the call's arguments are not valid: write them as one JSON object")


def arguments_for(
    decoded: Decoded, tool: str, schema: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """The tool's arguments, or the problem (naming what to fix) when they do not fit."""
    if decoded.problem is not None:
        return None, decoded.problem
    value = decoded.value
    required = schema.get("required")
    if value is EMPTY:
        if isinstance(required, list) and required:
            names = ", ".join(f'"{r}"' for r in required if isinstance(r, str))
            return None, f"Action Input is missing: {tool} needs a JSON object with {names}"
        value = {}
    if isinstance(value, str):
        parameter = single_string_parameter(schema)
        if parameter is None:
            return None, (
                f"Action Input must be a JSON object such as {example_input(schema)}, "
                "not plain text"
            )
        value = {parameter: value}
    if not isinstance(value, dict):
        return None, (
            f"Action Input must be a JSON object such as {example_input(schema)}, "
            f"not {_kind(value)}"
        )
    problem = schema_problem(value, schema)
    if problem is not None:
        return None, f"Action Input does not fit the arguments of {tool}: {problem}"
    return value, None


def example_input(schema: Mapping[str, Any]) -> str:
    """A short JSON object with the tool's required arguments, to show the shape."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = [r for r in schema.get("required", ()) if isinstance(r, str)] or list(properties)
    sample: dict[str, Any] = {}
    for name in required[:4]:
        spec = properties.get(name)
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        sample[name] = {
            "integer": 1,
            "number": 1.5,
            "boolean": True,
            "array": [],
            "object": {},
        }.get(kind if isinstance(kind, str) else "string", "...")
    return json.dumps(sample, ensure_ascii=False)


def _decode_object(body: str, start: int) -> Decoded:
    try:
        value, _ = _DECODER.raw_decode(body, start)
    except json.JSONDecodeError as exc:
        literal = _python_literal(body, start)
        if literal is not None:
            return Decoded(literal)
        return Decoded(problem=_describe(exc, body, start))
    except (ValueError, RecursionError) as exc:
        # Not a Python literal either: JSON raises these only for NaN, Infinity, a number
        # out of range (none of them a literal's value) or past a thousand levels (the
        # Python parser stops at 200).
        reason = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return Decoded(problem=f"Action Input is not valid JSON: {reason}")
    return Decoded(value)


def _describe(exc: json.JSONDecodeError, body: str, start: int) -> str:
    """The decoder's message and position, counted from the object's first brace."""
    before = body[start : exc.pos]
    line = before.count("\n") + 1
    column = exc.pos - start - (before.rfind("\n") + 1 if "\n" in before else 0) + 1
    near = body[max(start, exc.pos - 20) : exc.pos + 20].replace("\n", " ")
    return (
        f"Action Input is not valid JSON: {exc.msg} at line {line}, column {column} "
        f"(char {exc.pos - start}), near {near!r}"
    )


def _python_literal(body: str, start: int) -> dict[str, Any] | None:
    """A dict written as a Python literal (single quotes, trailing commas, True/None)."""
    end = balanced_end(body, start)
    if end < 0 or end - start > _MAX_LITERAL:
        return None
    try:
        value = _literal(ast.parse(body[start:end], mode="eval").body)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


_JSON_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False}


def _literal(node: ast.AST) -> Any:
    """A JSON-compatible value from a literal expression (also true/false/null)."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        raise ValueError("not a JSON value")
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.Dict):
        result: dict[str, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:
                raise ValueError("no ** in a literal")
            name = _literal(key)
            if not isinstance(name, str):
                raise ValueError("object keys must be strings")
            result[name] = _literal(item)
        return result
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _literal(node.operand)
        if isinstance(operand, (int, float)) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    raise ValueError("not a JSON value")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range for a number")
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return type(value).__name__
