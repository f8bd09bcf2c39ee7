"""A plugin with three compactors, for the tests of ``ollm_compactors``.

- ``keep-last``: the first message, then as many of the latest units (a message with
  the tool results that follow it) as fit the target;
- ``orphan``: leaves out the assistant messages that made calls, not their results (an
  invalid history, which the runtime must refuse before sending);
- ``broken``: raises;

and the tool ``read_page``, whose result is 2,000 tokens long.

Each writes the arguments of every call to ``$COMPACTOR_RECORD``, if set.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import ollm


def _record(name: str, messages: Sequence[ollm.Message], fixed: int, target: int) -> None:
    path = os.environ.get("COMPACTOR_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps([name, len(messages), fixed, target]) + "\n")


class KeepLast:
    """The first message, and the latest whole units that fit ``target``."""

    def compact(
        self,
        messages: Sequence[ollm.Message],
        *,
        fixed_tokens: int,
        target: int,
        count: ollm.MessageCounter,
    ) -> list[ollm.Message]:
        _record("keep-last", messages, fixed_tokens, target)
        first = list(messages[:1])
        units: list[list[ollm.Message]] = []
        for message in messages[1:]:
            if message.role == "tool" and units:
                units[-1].append(message)
            else:
                units.append([message])
        kept: list[ollm.Message] = []
        while units and (not kept or count([*first, *units[-1], *kept]) <= target):
            kept = [*units.pop(), *kept]
        return [*first, *kept]


class Orphan:
    """Leaves out the calls, keeps their results: not a valid history."""

    def compact(
        self,
        messages: Sequence[ollm.Message],
        *,
        fixed_tokens: int,
        target: int,
        count: ollm.MessageCounter,
    ) -> list[ollm.Message]:
        _record("orphan", messages, fixed_tokens, target)
        return [m for m in messages if not m.tool_calls]


class Broken:
    """Raises."""

    def compact(
        self,
        messages: Sequence[ollm.Message],
        *,
        fixed_tokens: int,
        target: int,
        count: ollm.MessageCounter,
    ) -> list[ollm.Message]:
        raise RuntimeError("the compactor broke")


def read_page(page: int) -> str:
    """Read a page of the book.

    Args:
        page: The page's number.
    """
    return f"page {page}: " + "lorem ipsum " * 666


@ollm.hookimpl
def ollm_tools() -> list[object]:
    """``read_page``."""
    return [read_page]


@ollm.hookimpl
def ollm_compactors() -> list[ollm.CompactorSpec]:
    """``keep-last``, ``orphan`` and ``broken``."""
    return [
        ollm.CompactorSpec("keep-last", KeepLast, "The first message and the latest that fit"),
        ollm.CompactorSpec("orphan", Orphan, "Leaves out calls, not their results (a test)"),
        ollm.CompactorSpec("broken", Broken, "Raises (a test)"),
    ]
