"""``ollm chat --schema``: the JSON Schema of a chat's typed output, from a file, JSON, or
a concise list of fields (``'name, age int, tags list[str]'``, as llm writes them).

Fields are separated by commas (or by newlines, when there are any: then a field's
description may hold commas). Each is ``NAME [TYPE][: DESCRIPTION]``; TYPE is ``str`` (the
default), ``int``, ``float``, ``bool``, or ``list[...]`` of one of them. Every field is
required. ``--schema-multi`` asks for a list of such objects, as ``{"items": [...]}``.

A JSON Schema (a file or the argument) is bounded: at most ``MAX_SCHEMA_BYTES`` of text,
then the bounds of every schema (``ollm.output.schema.schema_too_large``); past one, the
command ends with INVALID_REQUEST naming it, before anything is sent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ollm.errors import InvalidRequestError
from ollm.output.schema import MAX_SCHEMA_DEPTH, schema_too_large

__all__ = ["MAX_SCHEMA_BYTES", "schema_of"]

MAX_SCHEMA_BYTES = 1_000_000
"""The longest JSON Schema text ``--schema`` reads (a real one is a few kilobytes)."""

_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_FIELD = re.compile(r"\s*([A-Za-z_][\w-]*)\s*([^:]*?)\s*(?::\s*(.*?))?\s*$", re.DOTALL)
_LIST = re.compile(r"list\[\s*(\w+)\s*\]")


def schema_of(spec: str, *, multi: bool = False) -> dict[str, Any]:
    """The JSON Schema ``--schema spec`` means (``multi``: a list of them)."""
    text = spec.strip()
    if text.startswith("{"):
        schema = _json(text, "the --schema argument")
    elif _looks_like_a_file(text):
        path = Path(text).expanduser()
        try:
            # One byte past the bound tells a file too long without reading all of it.
            with path.open("rb") as file:
                content = file.read(MAX_SCHEMA_BYTES + 1).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise InvalidRequestError(
                f"--schema {text}: the file cannot be read ({why}). Give a "
                "JSON Schema file, or fields such as 'name, age int, tags list[str]'."
            ) from None
        schema = _json(content, f"the file {text}")
    else:
        schema = _concise(text)
    if multi:
        return {
            "type": "object",
            "properties": {"items": {"type": "array", "items": schema}},
            "required": ["items"],
        }
    return schema


def _looks_like_a_file(text: str) -> bool:
    return text.endswith(".json") or "/" in text or Path(text).expanduser().is_file()


def _json(text: str, where: str) -> dict[str, Any]:
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SCHEMA_BYTES:
        raise InvalidRequestError(
            f"{where} is longer than {MAX_SCHEMA_BYTES:,} bytes, ollm's bound for a JSON "
            "Schema; give a smaller one."
        )
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequestError(
            f"{where} is not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno}). "
            "Give a JSON Schema object, or fields such as 'name, age int'."
        ) from None
    except RecursionError:  # json's own bound, far past ours
        raise InvalidRequestError(
            f"{where}: the JSON Schema nests more than {MAX_SCHEMA_DEPTH} levels deep "
            "(ollm's bound); give a flatter one."
        ) from None
    if not isinstance(schema, dict):
        raise InvalidRequestError(f"{where} is not a JSON Schema object (a {{...}}).")
    too_large = schema_too_large(schema)
    if too_large is not None:
        raise InvalidRequestError(f"{where}: {too_large}.")
    return schema


def _concise(text: str) -> dict[str, Any]:
    parts = text.splitlines() if "\n" in text else text.split(",")
    properties: dict[str, Any] = {}
    for part in parts:
        if not part.strip():
            continue
        found = _FIELD.fullmatch(part)
        if found is None:
            raise InvalidRequestError(
                f"--schema: {part.strip()!r} is not a field. Write NAME [TYPE][: DESCRIPTION], "
                "for example 'name, age int, tags list[str]'."
            )
        name, kind, description = found.groups()
        schema = _type(kind or "str", name)
        if description:
            schema["description"] = description
        if name in properties:
            raise InvalidRequestError(f"--schema: the field {name!r} is named twice.")
        properties[name] = schema
    if not properties:
        raise InvalidRequestError(
            "--schema names no field. Write fields such as 'name, age int, tags list[str]', "
            "or give a JSON Schema file."
        )
    return {"type": "object", "properties": properties, "required": list(properties)}


def _type(kind: str, name: str) -> dict[str, Any]:
    if kind in _TYPES:
        return {"type": _TYPES[kind]}
    listed = _LIST.fullmatch(kind)
    if listed is not None and listed.group(1) in _TYPES:
        return {"type": "array", "items": {"type": _TYPES[listed.group(1)]}}
    raise InvalidRequestError(
        f"--schema: {kind!r} (the type of {name}) is not a type here: use str, int, float, "
        "bool, or list[...] of one of them (for example 'tags list[str]')."
    )
