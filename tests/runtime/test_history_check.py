"""Every request's history is checked before it is sent: no tool result without its call,
no call without its result, whatever a middleware (or a compactor) did to it."""

from __future__ import annotations

import msgspec
import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, client, collect

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


@ollm.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Drop:
    """A faulty middleware: removes the messages of one role from every request (the tool
    results, or the assistant messages that made the calls)."""

    def __init__(self, role: str) -> None:
        self.role = role

    async def on_request(
        self, context: ollm.MiddlewareContext, request: ollm.ProviderRequest
    ) -> ollm.ProviderRequest:
        kept = tuple(m for m in request.messages if m.role != self.role)
        return msgspec.structs.replace(request, messages=kept)


@pytest.mark.parametrize(
    ("middleware", "said"),
    [(Drop("tool"), "have no result right after it"), (Drop("assistant"), "that no assistant")],
)
async def test_a_request_with_an_orphan_is_never_sent(
    anyio_backend: str, middleware: object, said: str
) -> None:
    provider = ScriptedProvider(Reply(tool_calls=[("add", {"a": 1, "b": 2})]), Reply("3"))
    chat_client = client(provider, tools=[add], middleware=[middleware])
    events = await collect(chat_client.chat("1+2?"))
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert [e.code for e in errors] == ["INVALID_HISTORY"]
    assert said in errors[0].message
    assert_one_finish_last(events, "error")
    assert len(provider.requests) == 1  # the first went; the second was refused
    assert_history_valid(chat_client.conversation)  # the conversation is intact
    assert [m.role for m in chat_client.conversation] == ["user", "assistant", "tool"]


async def test_a_stored_history_with_an_orphan_result_is_refused(anyio_backend: str) -> None:
    orphan = ollm.Message.tool("3", call=ollm.ToolCall("call_1", "add", {}))
    provider = ScriptedProvider("never")
    chat_client = client(provider, conversation=ollm.Conversation([orphan]))
    events = await collect(chat_client.chat("go on"))
    assert [e.code for e in events if isinstance(e, ollm.ErrorEvent)] == ["INVALID_HISTORY"]
    assert provider.requests == []


async def test_calls_never_answered_then_a_new_prompt_is_refused(anyio_backend: str) -> None:
    asked = ollm.Message.assistant("", tool_calls=[ollm.ToolCall("call_1", "add", {"a": 1})])
    provider = ScriptedProvider("never")
    chat_client = client(provider, conversation=ollm.Conversation([ollm.Message.user("x"), asked]))
    events = await collect(chat_client.chat("something else"))
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert [e.code for e in errors] == ["INVALID_HISTORY"]
    assert "message 2" in errors[0].message
    assert "chat() and no prompt" in errors[0].message
    assert provider.requests == []


async def test_a_valid_history_with_parallel_calls_is_sent(anyio_backend: str) -> None:
    provider = ScriptedProvider(
        Reply(tool_calls=[("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]), Reply("3 and 7")
    )
    events = await collect(client(provider, tools=[add]).chat("two sums"))
    assert_one_finish_last(events, "stop")
    assert len(provider.requests) == 2
