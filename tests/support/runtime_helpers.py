"""Small helpers for the runtime tests."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Sequence
from typing import Any

import anyio.lowlevel

import ollm


async def collect(stream: AsyncIterable[ollm.ChatEvent]) -> list[ollm.ChatEvent]:
    """Every event of a chat, in order."""
    return [event async for event in stream]


def client(
    provider: ollm.ProviderAdapter, *, tools: Sequence[Any] = (), **kwargs: Any
) -> ollm.ChatClient:
    """A ChatClient on empty registries (no plugin discovery) and ``provider``."""
    return ollm.ChatClient(ollm.Registries(), provider=provider, tools=tools, **kwargs)


async def settle(condition: Callable[[], bool], rounds: int = 10_000) -> None:
    """Let the event loop run (checkpoints, no clock) until ``condition`` holds."""
    for _ in range(rounds):
        if condition():
            return
        await anyio.lowlevel.checkpoint()
    raise AssertionError(f"still not true after {rounds} turns of the event loop")


def finishes(events: Sequence[ollm.ChatEvent]) -> list[ollm.FinishEvent]:
    """The finish events of a chat (exactly one, last, in a correct run)."""
    return [e for e in events if isinstance(e, ollm.FinishEvent)]


def assert_one_finish_last(events: Sequence[ollm.ChatEvent], reason: str | None = None) -> None:
    """Exactly one finish, at the end, with ``reason`` if given."""
    found = finishes(events)
    assert len(found) == 1, events
    assert events[-1] is found[0], events
    if reason is not None:
        assert found[0].reason == reason, events


def assert_history_valid(conversation: ollm.Conversation) -> None:
    """Every tool call has exactly one tool message after it, before the next assistant turn."""
    pending: list[str] = []
    for message in conversation.messages:
        assert message.role in ollm.ROLES
        assert message.parts
        if message.role == "tool":
            assert message.tool_call_id in pending, (message, pending)
            pending.remove(message.tool_call_id)
            continue
        assert not pending, f"calls without results: {pending}"
        if message.role == "assistant":
            pending = [call.id for call in message.tool_calls]
    assert not pending, f"calls without results: {pending}"
