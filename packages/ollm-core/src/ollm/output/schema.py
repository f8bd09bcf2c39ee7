"""``OutputType``: what a chat's ``output=`` asks for, as a JSON Schema and a validator.

A pydantic model (any class with ``model_json_schema()`` and ``model_validate_json``:
found by duck typing, so core has no pydantic dependency) gives its own schema and is
validated by pydantic itself, its validators included. Otherwise validation is
msgspec's: a Python type is decoded with ``msgspec.json.decode(text,
type=T)``; a JSON Schema dict is first made into the msgspec type it describes (objects
become structs, ``enum`` a ``Literal``, bounds ``msgspec.Meta``), and its value is the
decoded JSON itself. A keyword that has no msgspec equivalent accepts any value there:
the model was still asked for the whole schema.

Internal: not part of ollm's public API; its layout may change in any release.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Annotated, Any, Literal, Union

import msgspec

from ollm.types.depth import MAX_JSON_DEPTH, nests_deeper_than

__all__ = [
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_ENUM",
    "MAX_SCHEMA_NODES",
    "OutputMismatch",
    "OutputType",
    "schema_too_large",
]

_AT_PATH = re.compile(r"^(?P<what>.*) - at `(?P<path>\$[^`]*)`$", re.DOTALL)

# A JSON Schema given as a dict is someone's input (a --schema file, a request to a
# server built on ollm): bounded before anything walks it, so that neither recursion nor
# a giant enum (a Literal of a million values costs seconds) can take a chat down.
# Real schemas are far below each: OpenAI's structured outputs allow 5 levels, 5,000
# properties and 1,000 enum values.
MAX_SCHEMA_DEPTH = MAX_JSON_DEPTH
"""The deepest nesting of a JSON Schema dict (its objects and arrays)."""
MAX_SCHEMA_NODES = 100_000
"""The most values (objects, arrays, strings, numbers...) a JSON Schema dict may hold."""
MAX_SCHEMA_ENUM = 10_000
"""The most values one ``enum`` of a JSON Schema may list."""


class OutputMismatch(Exception):
    """A reply that is not a value of the output's type; ``errors`` say where and why
    (``$.age: expected int, got str``). ``not_json`` when it is not JSON at all."""

    def __init__(self, errors: tuple[str, ...], *, not_json: bool) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors
        self.not_json = not_json


class OutputType:
    """The type a chat's output must have: its JSON Schema and its validation.

    ``OutputType(T)`` raises ``TypeError`` at once when ``T`` is none of the supported
    kinds (msgspec cannot make a schema of it).
    """

    __slots__ = ("_check", "_decoder", "_given", "_model", "_plain", "name", "schema")

    def __init__(self, given: Any) -> None:
        self._given = given
        self._decoder: msgspec.json.Decoder[Any]
        self._model: Any = None
        target: Any
        if _is_model_class(given):
            schema = given.model_json_schema()
            if not isinstance(schema, dict):
                raise TypeError(f"{given!r}.model_json_schema() gave no JSON Schema object")
            self.schema = _root_inlined(copy.deepcopy(schema))
            self._model = given
            target = Any
            self._plain = True
        elif isinstance(given, dict):
            too_large = schema_too_large(given)
            if too_large is not None:
                raise ValueError(f"output: {too_large}")
            self.schema = _root_inlined(copy.deepcopy(given))
            target = _JSONSchemaType(given).type_of(given, 0)
            try:
                msgspec.json.Decoder(target)
            except TypeError:
                target = Any  # a combination msgspec cannot check: the model was asked
            self._plain = True
        else:
            try:
                schema, decoder = (_of_type if _hashable(given) else _made)(given)
            except (TypeError, ValueError) as exc:
                raise TypeError(
                    "output must be a pydantic model, a msgspec Struct, a dataclass, a "
                    "TypedDict, a Literal, an enum, a list of those, or a JSON Schema dict; "
                    f"{given!r} is not one ({exc})"
                ) from None
            self.schema = copy.deepcopy(schema)  # the caller's to change
            self._decoder = decoder
            target = given
            self._plain = False
        if self._plain:
            self._decoder = msgspec.json.Decoder()
        self._check: Any = target
        title = self.schema.get("title")
        name = title if isinstance(title, str) else getattr(given, "__name__", "output")
        self.name = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(name))[:64]

    @property
    def given(self) -> Any:
        """What the caller passed as ``output``."""
        return self._given

    def decode(self, text: str) -> Any:
        """The value of ``text`` (JSON); ``OutputMismatch`` if it is not one, or if it
        nests more than ``MAX_JSON_DEPTH`` levels (as tool-call arguments may not)."""
        try:
            value = self._decoder.decode(text)
            if nests_deeper_than(value):
                raise RecursionError
            if self._model is not None:
                return self._validated(text)
            if self._plain:
                msgspec.convert(value, self._check)
        except msgspec.ValidationError as exc:
            raise OutputMismatch((explain(exc),), not_json=False) from None
        except msgspec.DecodeError as exc:
            why = str(exc).removeprefix("JSON is malformed: ")
            errors = (f"$: the reply is not valid JSON ({why})",)
            raise OutputMismatch(errors, not_json=True) from None
        except RecursionError:  # msgspec's own bound (about 1,000 levels), or ours
            errors = (f"$: the value nests more than {MAX_JSON_DEPTH} levels deep",)
            raise OutputMismatch(errors, not_json=False) from None
        return value

    def _validated(self, text: str) -> Any:
        """``text`` (JSON already) validated by the pydantic model itself."""
        try:
            return self._model.model_validate_json(text)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise OutputMismatch(_model_errors(exc), not_json=False) from None

    def encode(self, value: Any) -> str:
        """``value`` as the JSON a model would write for it."""
        dump = getattr(value, "model_dump_json", None)
        if callable(dump):
            return str(dump())
        return msgspec.json.encode(value).decode()


def _is_model_class(given: Any) -> bool:
    """Whether ``given`` is a pydantic model class, or quacks like one."""
    return (
        isinstance(given, type)
        and callable(getattr(given, "model_json_schema", None))
        and callable(getattr(given, "model_validate_json", None))
    )


def _model_errors(exc: ValueError) -> tuple[str, ...]:
    """A pydantic ``ValidationError`` as ``$.path: what`` lines (its ``errors()``)."""
    errors = getattr(exc, "errors", None)
    found: list[str] = []
    if callable(errors):
        try:
            listed = errors()
        except Exception:  # a look-alike whose errors() fails: its message is the error
            listed = []
        for error in listed if isinstance(listed, list) else []:
            if not isinstance(error, dict):
                continue
            path = "$" + "".join(
                f"[{part}]" if isinstance(part, int) else f".{part}"
                for part in error.get("loc", ())
            )
            what = str(error.get("msg", "invalid"))
            found.append(f"{path}: {what[:1].lower()}{what[1:]}")
    return tuple(found) or (f"$: {exc}",)


def schema_too_large(schema: object) -> str | None:
    """Why ``schema`` (a JSON Schema, decoded) is past ollm's bounds, or ``None``: more
    than ``MAX_SCHEMA_DEPTH`` levels, ``MAX_SCHEMA_NODES`` values or ``MAX_SCHEMA_ENUM``
    values in one ``enum``. Iterative, and it stops at the first bound passed."""
    stack: list[tuple[object, int]] = [(schema, 1)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > MAX_SCHEMA_NODES:
            return (
                f"the JSON Schema holds more than {MAX_SCHEMA_NODES:,} values "
                "(ollm's bound); give a smaller one"
            )
        if isinstance(item, dict):
            enum = item.get("enum")
            if isinstance(enum, list) and len(enum) > MAX_SCHEMA_ENUM:
                return (
                    f"an enum of the JSON Schema lists {len(enum):,} values, more than "
                    f"{MAX_SCHEMA_ENUM:,} (ollm's bound); use a string with a pattern or "
                    "a shorter list"
                )
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_SCHEMA_DEPTH:
            return (
                f"the JSON Schema nests more than {MAX_SCHEMA_DEPTH} levels deep "
                "(ollm's bound); give a flatter one"
            )
        stack.extend((child, depth + 1) for child in children)
    return None


def _made(given: Any) -> tuple[dict[str, Any], msgspec.json.Decoder[Any]]:
    """The JSON Schema and the decoder of a Python type."""
    return _root_inlined(msgspec.json.schema(given)), msgspec.json.Decoder(given)


# Made once per type: each chat with ``output=T`` would otherwise spend a millisecond on
# them, twice.
_of_type = functools.lru_cache(maxsize=64)(_made)


def _hashable(given: Any) -> bool:
    try:
        hash(given)
    except TypeError:
        return False
    return True


def explain(exc: msgspec.ValidationError) -> str:
    """msgspec's message as ``$.path: what`` (``$.age: expected int, got str``)."""
    message = str(exc)
    found = _AT_PATH.match(message)
    path, what = (found["path"], found["what"]) if found else ("$", message)
    what = what.replace("`", "")
    return f"{path}: {what[:1].lower()}{what[1:]}"


def _root_inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a root ``$ref`` replaced by what it points at (servers want the
    root's own type: OpenAI refuses a bare reference), its ``$defs`` kept."""
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, dict):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, dict):
            rest = {k: v for k, v in schema.items() if k not in ("$ref", "$defs")}
            inlined = {**target, **rest}
            if b"#/$defs/" in msgspec.json.encode(inlined):
                inlined["$defs"] = defs  # the root refers to itself or to other types
            return inlined
    return schema


class _JSONSchemaType:
    """The msgspec type a JSON Schema dict describes (as far as msgspec can say it)."""

    def __init__(self, root: dict[str, Any]) -> None:
        defs: dict[str, Any] = {}
        for key in ("$defs", "definitions"):
            found = root.get(key)
            if isinstance(found, dict):
                defs.update({f"#/{key}/{name}": value for name, value in found.items()})
        self.defs = defs
        self.count = 0

    def type_of(self, node: Any, depth: int, seen: tuple[str, ...] = ()) -> Any:
        if depth > MAX_SCHEMA_DEPTH or not isinstance(node, dict):
            return Any
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = self.defs.get(ref)
            if target is None or ref in seen:
                return Any  # unknown, or recursive: not checked below this point
            return self.type_of(target, depth + 1, (*seen, ref))
        if "const" in node:
            return _literal([node["const"]])
        if isinstance(node.get("enum"), list):
            return _literal(node["enum"])
        union = node.get("anyOf", node.get("oneOf"))
        if isinstance(union, list):
            return _union([self.type_of(item, depth + 1, seen) for item in union])
        kind = node.get("type")
        if isinstance(kind, list):
            return _union([self.type_of({**node, "type": k}, depth + 1, seen) for k in kind])
        if kind == "object":
            return self._object(node, depth, seen)
        if kind == "array":
            items = self.type_of(node.get("items", {}), depth + 1, seen)
            return _bounded(list[items], node, min_length="minItems", max_length="maxItems")  # type: ignore[valid-type]
        if kind == "string":
            return _bounded(str, node, min_length="minLength", max_length="maxLength")
        if kind in ("integer", "number"):
            return _bounded(int if kind == "integer" else float, node)
        return {"boolean": bool, "null": None}.get(str(kind), Any)

    def _object(self, node: dict[str, Any], depth: int, seen: tuple[str, ...]) -> Any:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if not isinstance(properties, dict) or not properties:
            values = self.type_of(extra, depth + 1, seen) if isinstance(extra, dict) else Any
            return dict[str, values]  # type: ignore[valid-type]
        required = set(node.get("required") or ())
        fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
        rename: dict[str, str] = {}
        for index, (name, schema) in enumerate(properties.items()):
            field = f"f{index}"
            rename[field] = str(name)
            kind = self.type_of(schema, depth + 1, seen)
            if name in required:
                fields.append((field, kind))
            else:
                fields.append((field, Union[kind, msgspec.UnsetType], msgspec.UNSET))  # noqa: UP007
        fields.sort(key=lambda f: len(f) == 3)  # required fields first
        self.count += 1
        return msgspec.defstruct(
            f"Object{self.count}",
            fields,
            rename=rename,
            forbid_unknown_fields=extra is False,
        )


def _literal(values: list[Any]) -> Any:
    if values and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in values):
        return Literal[tuple(values)]
    return Any


def _union(kinds: list[Any]) -> Any:
    if not kinds or Any in kinds:
        return Any
    joined: Any = Union[tuple(kinds)]  # noqa: UP007
    try:
        msgspec.json.Decoder(joined)
    except TypeError:
        return Any  # a union msgspec cannot tell apart (two object types...)
    return joined


def _bounded(kind: Any, node: dict[str, Any], **names: str) -> Any:
    keys = {
        "ge": "minimum",
        "le": "maximum",
        "gt": "exclusiveMinimum",
        "lt": "exclusiveMaximum",
        "pattern": "pattern",
        **names,
    }
    meta = {arg: node[key] for arg, key in keys.items() if key in node}
    if not meta:
        return kind
    try:
        return Annotated[kind, msgspec.Meta(**meta)]
    except (TypeError, ValueError):
        return kind
