"""How deeply JSON-like data nests, measured without recursion.

Model and server output can nest anything; Python's json and msgspec give up near
1,000 levels with a ``RecursionError``, and so would every later step that walks the
value (validation, encoding the history for the next request). Tool-call arguments
deeper than ``MAX_JSON_DEPTH`` are refused where they enter ollm.
"""

from __future__ import annotations

__all__ = ["MAX_JSON_DEPTH", "nests_deeper_than"]

MAX_JSON_DEPTH = 64
"""The deepest nesting accepted in tool-call arguments (real tools need a handful)."""


def nests_deeper_than(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` (dicts, lists, tuples, scalars) nests more than ``limit`` levels.

    Iterative, so any depth is measured without a ``RecursionError``; it stops as soon
    as one branch is too deep.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: object = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)  # type: ignore[attr-defined]
    return False
