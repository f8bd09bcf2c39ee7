"""A plugin with three compactors, for the tests of ``ollm_compactors``.

- ``keep-last``: the first message, then as many of the latest units (a message with
  the tool results that follow it) as fit the target;
- ``orphan``: leaves out the assistant messages that made calls, not their results (an
  invalid history, which the runtime must refuse before sending);
- ``broken``: raises;

and the tool ``read_page``, whose result is 2,000 tokens long. ``fetch`` and ``calling``
are a tool and the scripted reply that calls it, for the compaction tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import ollm
from ollm_testutils.mock import Reply

BIG = "x" * 8000  # 2,000 tokens at 4 characters a token


@ollm.tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return BIG


def calling(page: int) -> Reply:
    """A reply that calls ``fetch`` for ``page``."""
    return Reply(tool_calls=[("fetch", {"page": page})])


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
        return self.pick(messages, target, count)

    def pick(
        self, messages: Sequence[ollm.Message], target: int, count: ollm.MessageCounter
    ) -> list[ollm.Message]:
        """What ``compact`` returns."""
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


class Orphan(KeepLast):
    """Leaves out the calls, keeps their results: not a valid history."""

    def pick(
        self, messages: Sequence[ollm.Message], target: int, count: ollm.MessageCounter
    ) -> list[ollm.Message]:
        return [m for m in messages if not m.tool_calls]


class Broken(KeepLast):
    """Raises."""

    def pick(
        self, messages: Sequence[ollm.Message], target: int, count: ollm.MessageCounter
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
