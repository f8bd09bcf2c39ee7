"""JSON Schema to the Gemini API's ``Schema``: the OpenAPI 3.0 subset ``parameters`` takes.

The rules (WIRE.md, "Tools"):

- ``$ref`` to ``#/$defs/...`` or ``#/definitions/...`` is inlined; a recursive one
  cannot be inlined;
- ``type`` is upper case; ``["T", "null"]`` is ``T`` with ``nullable``; several types are
  an ``anyOf``; ``oneOf`` is an ``anyOf`` (Gemini has no exclusive union); ``allOf`` of
  objects is merged;
- ``enum`` is for strings: ``null`` in it becomes ``nullable``, an enum of numbers or
  booleans stays typed and is said in the description; ``const`` is a one-value enum;
- ``format`` is kept where Gemini knows it (``date-time`` and ``enum`` for strings,
  ``int32``/``int64``, ``float``/``double``), else said in the description;
- ``exclusiveMinimum``/``exclusiveMaximum`` become ``minimum``/``maximum``; ``title``
  joins the description; keywords with no equivalent (``additionalProperties``,
  ``patternProperties``, ``not``, ``if``/``then``/``else``, ``$schema``, ``examples``...)
  are dropped: they loosen what the model is told, not what the tool accepts (the tool
  still checks its arguments: an ollm tool against its type hints);
- a value with no type (``{}``, "anything") and a recursive type cannot be written in
  this subset: ``Unexpressible`` names the field, and the tool is sent as
  ``parametersJsonSchema`` (full JSON Schema, v1beta) instead.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["Unexpressible", "check_tool_name", "to_gemini_schema"]

_TYPES = {
    "string": "STRING",
    "number": "NUMBER",
    "integer": "INTEGER",
    "boolean": "BOOLEAN",
    "array": "ARRAY",
    "object": "OBJECT",
}
_FORMATS = {
    "STRING": {"date-time", "enum"},
    "INTEGER": {"int32", "int64"},
    "NUMBER": {"float", "double"},
}
# Copied as they are (numbers and lists Gemini reads with the same meaning).
_SAME = (
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "pattern",
    "minimum",
    "maximum",
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]{0,63}")
_MAX_DEPTH = 64


class Unexpressible(ValueError):
    """A part of a schema the ``Schema`` subset cannot say; ``field`` is where."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def check_tool_name(name: str) -> str | None:
    """Why Gemini would refuse ``name`` as a function's name, or ``None``."""
    if _NAME.fullmatch(name):
        return None
    return (
        "a function's name must start with a letter or an underscore, hold only letters, "
        "digits, '_', '.', ':' and '-', and be at most 64 characters"
    )


def to_gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (a tool's parameters) in Gemini's subset; ``Unexpressible`` if it can't be."""
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        found = schema.get(key)
        if isinstance(found, dict):
            defs.update({f"#/{key}/{name}": value for name, value in found.items()})
    return _Converter(defs).convert(schema, "parameters", ())


class _Converter:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs

    def convert(self, node: Any, where: str, seen: tuple[str, ...]) -> dict[str, Any]:
        if len(seen) > _MAX_DEPTH or where.count(".") > _MAX_DEPTH:
            raise Unexpressible(where, "nested too deeply")
        if node is True:
            raise Unexpressible(where, "accepts any value, and every field needs a type")
        if not isinstance(node, dict):
            raise Unexpressible(where, f"is {node!r}, not a schema object")
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in seen:
                raise Unexpressible(where, f"refers to itself ({ref}): a recursive type")
            target = self.defs.get(ref)
            if target is None:
                raise Unexpressible(where, f"refers to {ref}, which the schema does not define")
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return self.convert(merged, where, (*seen, ref))
        node = self._merge_all_of(node, where, seen)
        out: dict[str, Any] = {}
        notes: list[str] = []
        nullable = node.get("nullable") is True
        types = node.get("type")
        union = node.get("anyOf") if "anyOf" in node else node.get("oneOf")
        if isinstance(types, list):
            names = [t for t in types if t != "null"]
            nullable = nullable or len(names) < len(types)
            if len(names) > 1 and union is None:
                union = [{**node, "type": t} for t in names]
                types = None
            else:
                types = names[0] if names else None
        if isinstance(union, list):
            options = [o for o in union if not (isinstance(o, dict) and o.get("type") == "null")]
            nullable = nullable or len(options) < len(union)
            if len(options) == 1:
                rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
                single = self.convert({**rest, **options[0]}, where, seen)
                if nullable:
                    single["nullable"] = True
                return single
            out["anyOf"] = [
                self.convert(option, f"{where}.anyOf[{i}]", seen)
                for i, option in enumerate(options)
            ]
            types = None
        enum = node.get("enum")
        if "const" in node:
            enum = [node["const"]]
        if isinstance(enum, list):
            values = [v for v in enum if v is not None]
            nullable = nullable or len(values) < len(enum)
            if types is None and all(isinstance(v, str) for v in values):
                types = "string"
            if all(isinstance(v, str) for v in values) and types == "string":
                out["enum"] = values
            elif values:
                notes.append("one of: " + ", ".join(_literal(v) for v in values))
        if types is None and "anyOf" not in out:
            if "properties" in node:
                types = "object"
            elif "items" in node:
                types = "array"
            elif not out:
                raise Unexpressible(where, "has no type (any value), and every field needs one")
        if types is not None:
            kind = _TYPES.get(str(types))
            if kind is None:
                raise Unexpressible(where, f"has the type {types!r}, which Gemini does not know")
            out["type"] = kind
            self._typed(node, kind, out, notes, where, seen)
        description = node.get("description")
        title = node.get("title")
        text = " ".join(
            str(part) for part in (title if where != "parameters" else None, description) if part
        )
        if notes:
            text = f"{text} ({'; '.join(notes)})" if text else "; ".join(notes).capitalize()
        if text:
            out["description"] = text
        if nullable:
            out["nullable"] = True
        if "default" in node and node["default"] is not None:
            out["default"] = node["default"]
        return out

    def _typed(
        self,
        node: dict[str, Any],
        kind: str,
        out: dict[str, Any],
        notes: list[str],
        where: str,
        seen: tuple[str, ...],
    ) -> None:
        for key in _SAME:
            if key in node and isinstance(node[key], (int, float, str)):
                out[key] = node[key]
        for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            value = node.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[bound] = value
        fmt = node.get("format")
        if isinstance(fmt, str):
            if fmt in _FORMATS.get(kind, ()):
                out["format"] = fmt
            else:
                notes.append(f"format: {fmt}")
        if kind == "OBJECT":
            properties = node.get("properties")
            if isinstance(properties, dict) and properties:
                out["properties"] = {
                    name: self.convert(value, f"{where}.{name}", seen)
                    for name, value in properties.items()
                }
                out["propertyOrdering"] = list(properties)
                required = node.get("required")
                if isinstance(required, list):
                    kept = [r for r in required if isinstance(r, str) and r in properties]
                    if kept:
                        out["required"] = kept
        elif kind == "ARRAY":
            items = node.get("items")
            if isinstance(items, list):
                raise Unexpressible(where, "is a tuple (items as a list), which Gemini cannot say")
            if items is None:
                raise Unexpressible(where, "is an array of anything (no items)")
            out["items"] = self.convert(items, f"{where}[]", seen)

    def _merge_all_of(
        self, node: dict[str, Any], where: str, seen: tuple[str, ...]
    ) -> dict[str, Any]:
        parts = node.get("allOf")
        if not isinstance(parts, list):
            return node
        merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
        properties: dict[str, Any] = dict(merged.get("properties") or {})
        required: list[str] = list(merged.get("required") or [])
        for part in parts:
            if isinstance(part, dict) and isinstance(part.get("$ref"), str):
                ref = part["$ref"]
                if ref in seen:
                    raise Unexpressible(where, f"refers to itself ({ref}): a recursive type")
                part = self.defs.get(ref, part)
            if not isinstance(part, dict):
                raise Unexpressible(where, "has an allOf entry that is not a schema object")
            part = self._merge_all_of(part, where, seen)
            properties.update(part.get("properties") or {})
            required.extend(r for r in part.get("required") or [] if r not in required)
            for key, value in part.items():
                if key not in ("properties", "required"):
                    merged.setdefault(key, value)
        if properties:
            merged["properties"] = properties
            merged.setdefault("type", "object")
        if required:
            merged["required"] = required
        return merged


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)
