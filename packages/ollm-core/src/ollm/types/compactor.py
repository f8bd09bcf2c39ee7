"""Compactors: what a request leaves out of a long conversation to fit the window.

A plugin offers one with ``ollm_compactors()`` (a ``CompactorSpec``); a chat uses it
when it names it (``compact="NAME"``, ``ollm chat --compact NAME``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import msgspec

from ollm.types.messages import Message

__all__ = ["Compactor", "CompactorSpec", "MessageCounter"]

MessageCounter = Callable[[Sequence[Message]], int]
"""The estimated tokens of some messages (as ollm counts them before a request)."""


@runtime_checkable
class Compactor(Protocol):
    """A compaction strategy: one object per chat, built by a ``CompactorSpec``."""

    def compact(
        self,
        messages: Sequence[Message],
        *,
        fixed_tokens: int,
        target: int,
        count: MessageCounter,
    ) -> Sequence[Message]:
        """The messages to send instead of ``messages`` (the whole conversation, which
        with ``fixed_tokens``, the system prompt and the tools, passed ``compact_at`` of
        the window): ideally ``count(result) + fixed_tokens <= target``.

        Leave out or shorten whole units only: a tool result never goes without the
        assistant message that called it, nor a call without its result. The runtime
        checks what it returns before sending it (``INVALID_HISTORY`` otherwise); an
        exception ends the chat with ``PLUGIN_ERROR``. The conversation keeps every
        message whatever this returns.
        """
        ...


class CompactorSpec(msgspec.Struct, frozen=True):
    """A compactor that a chat uses only when it is named (``compact="NAME"``).

    ``factory()`` builds one ``Compactor`` per chat; import heavy modules inside it.
    """

    name: str
    factory: Callable[[], Compactor]
    description: str = ""
