"""Check a model's arguments against a tool's JSON Schema before anything runs.

Only what a tool's schema usually says is checked: types, required and unexpected
properties, enums and constants, array items, ``anyOf``/``oneOf``/``allOf``, local
``$ref``s, and the common bounds. Unknown keywords are ignored. Numbers and booleans
written as strings (``"5"``, ``"true"``) pass, because tools convert them the same way
with native tool calling; anything else that does not fit is named with its path
(``$.units``), in msgspec's style.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

__all__ = ["schema_problem", "single_string_parameter", "without_patterns"]

_T = TypeVar("_T")

_MAX_DEPTH = 64
_INTEGER = re.compile(r"[ \t]*[-+]?[0-9]+[ \t]*")
_NUMBER = re.compile(r"[ \t]*[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?[ \t]*")


def schema_problem(value: Any, schema: Mapping[str, Any]) -> str | None:
    """What is wrong with ``value`` for ``schema``, or ``None`` when it fits."""
    return _check(value, schema, schema, "$", 0)


def single_string_parameter(schema: Mapping[str, Any]) -> str | None:
    """The parameter's name when the tool has exactly one required parameter, a string."""
    required = schema.get("required")
    properties = schema.get("properties")
    if not isinstance(required, list) or len(required) != 1 or not isinstance(properties, dict):
        return None
    name = required[0]
    spec = properties.get(name) if isinstance(name, str) else None
    if not isinstance(spec, dict):
        return None
    return name if "string" in _types_of(_resolve(spec, schema, 0), schema) else None


def _types_of(spec: Mapping[str, Any], root: Mapping[str, Any]) -> set[str]:
    kind = spec.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    found: set[str] = set()
    for key in ("anyOf", "oneOf"):
        options = spec.get(key)
        if isinstance(options, list):
            for option in options:
                if isinstance(option, dict):
                    found |= _types_of(_resolve(option, root, 0), root)
    return found


def _resolve(spec: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> Mapping[str, Any]:
    """Follow a local ``$ref`` (``#/$defs/X``, ``#/definitions/X``)."""
    while "$ref" in spec and depth < _MAX_DEPTH:
        ref = spec["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            return {}
        target: Any = root
        for part in ref[1:].split("/"):
            if not part:
                continue
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                return {}
            target = target[part]
        if not isinstance(target, dict):
            return {}
        spec = target
        depth += 1
    return spec


def _check(
    value: Any, spec: Mapping[str, Any], root: Mapping[str, Any], path: str, depth: int
) -> str | None:
    if depth > _MAX_DEPTH or not isinstance(spec, Mapping):
        return None
    spec = _resolve(spec, root, depth)
    for part in _list(spec.get("allOf")):
        problem = _check(value, part, root, path, depth + 1)
        if problem:
            return problem
    for key in ("anyOf", "oneOf"):
        options = [o for o in _list(spec.get(key)) if isinstance(o, Mapping)]
        if options:
            problems = [_check(value, o, root, path, depth + 1) for o in options]
            if all(problems):
                return _none_of(value, options, root, path, problems)
    if "const" in spec and not _same(value, spec["const"]):
        return f"Expected {_show(spec['const'])}, got {_show(value)} - at `{path}`"
    enum = spec.get("enum")
    if isinstance(enum, list) and not any(_same(value, option) for option in enum):
        allowed = ", ".join(_show(option) for option in enum[:20])
        return f"Expected one of {allowed}; got {_show(value)} - at `{path}`"
    kinds = _declared_types(spec)
    if kinds and not any(_is_type(value, kind) for kind in kinds):
        return f"Expected `{' | '.join(kinds)}`, got `{_json_type(value)}` - at `{path}`"
    if isinstance(value, dict):
        return _check_object(value, spec, root, path, depth)
    if isinstance(value, list):
        return _check_array(value, spec, root, path, depth)
    return _check_bounds(value, spec, path)


def _check_object(
    value: dict[str, Any], spec: Mapping[str, Any], root: Mapping[str, Any], path: str, depth: int
) -> str | None:
    for key in _list(spec.get("required")):
        if isinstance(key, str) and key not in value:
            return f"Object missing required field `{key}` - at `{path}`"
    properties = spec.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    extra = spec.get("additionalProperties", True)
    for key, item in value.items():
        where = f"{path}.{key}" if key.isidentifier() else f"{path}[{key!r}]"
        if key in properties:
            problem = _check(item, properties[key], root, where, depth + 1)
        elif extra is False:
            known = ", ".join(f"`{k}`" for k in properties) or "none"
            problem = f"Object contains unknown field `{key}` (known: {known}) - at `{path}`"
        elif isinstance(extra, Mapping):
            problem = _check(item, extra, root, where, depth + 1)
        else:
            problem = None
        if problem:
            return problem
    return None


def _check_array(
    value: list[Any], spec: Mapping[str, Any], root: Mapping[str, Any], path: str, depth: int
) -> str | None:
    items = spec.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            problem = _check(item, items, root, f"{path}[{index}]", depth + 1)
            if problem:
                return problem
    return _check_length(len(value), spec, "minItems", "maxItems", "an array", path)


def _check_bounds(value: Any, spec: Mapping[str, Any], path: str) -> str | None:
    if isinstance(value, str):
        problem = _check_length(len(value), spec, "minLength", "maxLength", "a string", path)
        if problem:
            return problem
        pattern = spec.get("pattern")
        if isinstance(pattern, str):
            try:
                matched = re.search(pattern, value) is not None
            except (re.error, RecursionError):
                matched = True
            if not matched:
                return f"Expected a string matching regex {pattern!r} - at `{path}`"
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    for key, holds, sign in _BOUNDS:
        bound = spec.get(key)
        numeric = isinstance(bound, (int, float)) and not isinstance(bound, bool)
        if numeric and not holds(value, bound):
            return f"Expected a number {sign} {bound} - at `{path}`"
    return None


_BOUNDS: tuple[tuple[str, Callable[[Any, Any], bool], str], ...] = (
    ("minimum", operator.ge, ">="),
    ("maximum", operator.le, "<="),
    ("exclusiveMinimum", operator.gt, ">"),
    ("exclusiveMaximum", operator.lt, "<"),
)


def _check_length(
    length: int, spec: Mapping[str, Any], low_key: str, high_key: str, what: str, path: str
) -> str | None:
    low, high = spec.get(low_key), spec.get(high_key)
    if isinstance(low, int) and not isinstance(low, bool) and length < low:
        return f"Expected {what} of length >= {low} - at `{path}`"
    if isinstance(high, int) and not isinstance(high, bool) and length > high:
        return f"Expected {what} of length <= {high} - at `{path}`"
    return None


def _declared_types(spec: Mapping[str, Any]) -> list[str]:
    kind = spec.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


def _is_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool) or (
            isinstance(value, str) and value.strip().lower() in ("true", "false")
        )
    if kind == "integer":
        if isinstance(value, bool):
            return False
        if isinstance(value, int):
            return True
        if isinstance(value, float):
            return math.isfinite(value) and value.is_integer()
        return isinstance(value, str) and _INTEGER.fullmatch(value) is not None
    if kind == "number":
        if isinstance(value, bool):
            return False
        if isinstance(value, (int, float)):
            return True
        return isinstance(value, str) and _NUMBER.fullmatch(value) is not None
    return True  # a type this checker does not know: let the tool decide


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``True`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(type(a) is type(b) and a == b) or (
            isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b
        )
    except Exception:
        return False


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _none_of(
    value: Any,
    options: list[Mapping[str, Any]],
    root: Mapping[str, Any],
    path: str,
    problems: list[str | None],
) -> str:
    kinds = [k for o in options for k in _declared_types(_resolve(o, root, 0))]
    if kinds and not any(_is_type(value, kind) for kind in kinds):
        allowed = " | ".join(dict.fromkeys(kinds))
        return f"Expected `{allowed}`, got `{_json_type(value)}` - at `{path}`"
    return _first(problems)


def _first(problems: list[str | None]) -> str:
    return next((p for p in problems if p), "no allowed form matches")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def without_patterns(schema: _T) -> _T:
    """``schema`` without the regular expressions of its ``pattern`` keywords (a
    property named "pattern" stays)."""
    if isinstance(schema, dict):
        return cast(
            _T,
            {
                key: without_patterns(value)
                for key, value in schema.items()
                if not (key == "pattern" and isinstance(value, str))
            },
        )
    if isinstance(schema, list):
        return cast(_T, [without_patterns(value) for value in schema])
    return schema
