"""From a function's signature to a msgspec type for its arguments and a JSON Schema."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from ollm.errors import InvalidToolError

__all__ = ["Signature", "inline_refs", "read_signature"]

_EMPTY = inspect.Parameter.empty


class Signature:
    """What ``read_signature`` learnt: the argument type, its schema, injected params."""

    __slots__ = ("args_type", "injected", "positional", "schema")

    def __init__(
        self,
        args_type: type[msgspec.Struct],
        schema: dict[str, Any],
        positional: tuple[str, ...],
        injected: dict[str, type],
    ) -> None:
        self.args_type = args_type
        self.schema = schema
        self.positional = positional
        self.injected = injected


def read_signature(
    function: Callable[..., Any],
    tool_name: str,
    param_docs: dict[str, str],
    injectable: tuple[type, ...],
) -> Signature:
    """Build the argument type and schema of ``function``.

    Parameters annotated with one of ``injectable`` are filled by the runtime, not the
    model, and stay out of the schema.
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise InvalidToolError(f"Cannot read the signature of tool {tool_name!r}: {exc}") from exc
    target, bound = _unwrap(function)
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception as exc:
        raise InvalidToolError(
            f"Cannot resolve the type hints of tool {tool_name!r}: {str(exc).rstrip('.')}. "
            "Make every annotation importable where the function is defined."
        ) from exc

    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    positional: list[str] = []
    injected: dict[str, type] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise InvalidToolError(
                f"Tool {tool_name!r} takes {star}{param.name}; a tool needs named, typed "
                "parameters so the model knows what to pass."
            )
        if param.name in bound:
            continue  # given by a partial: never the model's to choose (or to read)
        if param.name not in hints:
            raise InvalidToolError(
                f"Parameter {param.name!r} of tool {tool_name!r} has no type annotation. "
                f"Add one (for example `{param.name}: str`) so the model knows what to pass."
            )
        hint = hints[param.name]
        bare = _strip_annotated(hint)
        if isinstance(bare, type) and issubclass(bare, injectable):
            injected[param.name] = bare
            continue
        if param.kind is param.POSITIONAL_ONLY:
            positional.append(param.name)
        doc = param_docs.get(param.name)
        if doc and not _has_description(hint):
            hint = Annotated[hint, msgspec.Meta(description=doc)]
        if param.default is _EMPTY:
            fields.append((param.name, hint))
        else:
            fields.append((param.name, hint, param.default))

    struct_name = "".join(p.capitalize() for p in tool_name.replace("-", "_").split("_")) or "Tool"
    try:
        args_type = msgspec.defstruct(f"{struct_name}Args", fields, kw_only=True)
        raw_schema = msgspec.json.schema(args_type)
    except (TypeError, ValueError) as exc:
        raise InvalidToolError(
            f"Tool {tool_name!r} has a parameter type that cannot be described as JSON: {exc}"
        ) from exc
    return Signature(args_type, inline_refs(raw_schema), tuple(positional), injected)


def _unwrap(function: Callable[..., Any]) -> tuple[Any, frozenset[str]]:
    """What holds the type hints: a partial's function (and the names its keywords
    bind), an object's ``__call__``, a class's ``__init__``."""
    target: Any = function
    bound: set[str] = set()
    while isinstance(target, functools.partial):
        bound.update(target.keywords)
        target = target.func
    if isinstance(target, type):
        target = target.__init__  # type: ignore[misc]
    elif not inspect.isroutine(target):
        target = type(target).__call__  # an object called like a function
    return target, frozenset(bound)


def _strip_annotated(hint: Any) -> Any:
    while typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    return hint


def _has_description(hint: Any) -> bool:
    if typing.get_origin(hint) is not Annotated:
        return False
    return any(
        isinstance(meta, msgspec.Meta) and meta.description for meta in typing.get_args(hint)[1:]
    )


# Keywords whose value maps names (of properties, definitions) to schemas: a key there
# is a name, so a property called "title" is kept.
_NAME_MAPS = frozenset(
    ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
)


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve ``$ref``s into a self-contained schema and drop ``title``s.

    Some servers keep only a few keywords per property (Ollama drops ``$ref``), so
    an enum or a nested object must be spelt out where it is used. A type that refers
    to itself cannot be inlined: the schema then keeps ``$defs`` and its ``$ref``s.
    Only the ``title`` keyword goes: a property named ``title`` stays.
    """
    defs: dict[str, Any] = schema.get("$defs", {})

    class _Recursive(Exception):
        pass

    def resolve(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, stack) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/") :]
            if name in stack:
                raise _Recursive
            target = resolve(defs.get(name, {}), (*stack, name))
            extra = {
                k: resolve_child(k, v, stack) for k, v in node.items() if k not in ("$ref", "$defs")
            }
            return {**target, **extra}
        return {
            k: resolve_child(k, v, stack) for k, v in node.items() if k not in ("title", "$defs")
        }

    def resolve_child(key: str, value: Any, stack: tuple[str, ...]) -> Any:
        if key in _NAME_MAPS and isinstance(value, dict):
            return {name: resolve(sub, stack) for name, sub in value.items()}
        return resolve(value, stack)

    try:
        return resolve(schema, ())  # type: ignore[no-any-return]
    except _Recursive:
        pass

    def strip_titles(node: Any, names: bool = False) -> Any:
        if isinstance(node, list):
            return [strip_titles(item) for item in node]
        if isinstance(node, dict):
            return {
                k: strip_titles(v, names=not names and k in _NAME_MAPS)
                for k, v in node.items()
                if names or k != "title"
            }
        return node

    ref = schema.get("$ref", "")
    root_name = ref[len("#/$defs/") :] if isinstance(ref, str) else ""
    root = strip_titles(defs.get(root_name, schema))
    kept = strip_titles(defs, names=True)
    if root_name in kept and not _refers_to(kept, f"#/$defs/{root_name}"):
        del kept[root_name]  # the root itself, spelt out above: said once, not twice
    root["$defs"] = kept
    return root  # type: ignore[no-any-return]


def _refers_to(node: Any, ref: str) -> bool:
    if isinstance(node, list):
        return any(_refers_to(item, ref) for item in node)
    if isinstance(node, dict):
        return node.get("$ref") == ref or any(_refers_to(v, ref) for v in node.values())
    return False
