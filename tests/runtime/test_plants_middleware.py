"""Middleware layers that each change something: every change reaches the next layer and
the history, in the onion's order. Bugs planted by hand that the first tests let through
(tests/plants.toml, module ``middleware``)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, client, collect

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


class Tag:
    """Appends its name to every assistant message's text and to every request's last
    message; notes the tool results it sees after a call."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.results: list[str] = []

    async def on_request(self, ctx: Any, request: ollm.ProviderRequest) -> Any:
        note = ollm.Message.user(f"(seen by {self.name})")
        return msgspec.structs.replace(request, messages=(*request.messages, note))

    async def on_message(self, ctx: Any, message: ollm.Message) -> Any:
        if message.role != "assistant":
            return None
        text = f"{message.text} [{self.name}]"
        return msgspec.structs.replace(message, parts=(ollm.TextPart(text),))

    async def after_tool_call(self, ctx: Any, call: Any, result: ollm.ToolResult) -> Any:
        self.results.append(result.text)
        return None


async def test_every_layers_change_to_a_request_reaches_the_provider(anyio_backend: str) -> None:
    provider = ScriptedProvider("ok")
    await client(provider, middleware=[Tag("outer"), Tag("inner")]).run("hi")
    assert [m.text for m in provider.requests[0].messages] == [
        "hi",
        "(seen by outer)",
        "(seen by inner)",
    ]


async def test_every_layers_change_to_a_message_is_kept_inner_first(anyio_backend: str) -> None:
    provider = ScriptedProvider("3")
    chat_client = client(provider, middleware=[Tag("outer"), Tag("inner")])
    events = await collect(chat_client.chat("1+2?"))
    assert_one_finish_last(events, "stop")
    assert chat_client.conversation.messages[-1].text == "3 [inner] [outer]"


async def test_a_reply_cut_short_is_kept_through_the_plain_on_message(anyio_backend: str) -> None:
    class Plain:
        def on_message(self, ctx: Any, message: ollm.Message) -> Any:
            if message.role != "assistant":
                return None
            return msgspec.structs.replace(message, parts=(ollm.TextPart(message.text.upper()),))

    chat_client = client(ScriptedProvider(Reply(["hello ", "there"])), middleware=[Plain()])
    async with chat_client.chat("hi") as stream:
        async for event in stream:
            if isinstance(event, ollm.TextEvent):
                break
    last = chat_client.conversation.messages[-1]
    assert last.role == "assistant"
    assert last.text == last.text.upper()
    assert last.text.strip()


async def test_a_layer_inside_a_denial_never_sees_the_call(anyio_backend: str) -> None:
    class Refuse:
        def before_tool_call(self, ctx: Any, call: ollm.ToolCall) -> Any:
            return ollm.Deny("not today")

    outer, inner = Tag("outer"), Tag("inner")
    provider = ScriptedProvider(Reply(tool_calls=[("add", {"a": 1, "b": 2})]), Reply("ok"))
    chat_client = client(provider, tools=[add], middleware=[outer, Refuse(), inner])
    events = await collect(chat_client.chat("1+2?"))
    assert_one_finish_last(events, "stop")
    assert inner.results == []
    (seen,) = outer.results
    assert "not today" in seen
    assert_history_valid(chat_client.conversation)


async def test_events_a_layer_adds_all_reach_the_outer_layers(anyio_backend: str) -> None:
    seen: list[str] = []

    class Split:
        def on_event(self, ctx: Any, event: ollm.ChatEvent) -> Any:
            if isinstance(event, ollm.TextEvent):
                return [ollm.TextEvent(c) for c in event.text]
            return event

    class Watch:
        def on_event(self, ctx: Any, event: ollm.ChatEvent) -> Any:
            if isinstance(event, ollm.TextEvent):
                seen.append(event.text)
            return event

    events = await collect(
        client(ScriptedProvider("abc")).chat("hi", middleware=[Watch(), Split()])
    )
    assert seen == ["a", "b", "c"]
    assert "".join(e.text for e in events if isinstance(e, ollm.TextEvent)) == "abc"


async def test_a_rewritten_call_runs_with_the_rewrite(anyio_backend: str) -> None:
    class Double:
        def before_tool_call(self, ctx: Any, call: ollm.ToolCall) -> Any:
            return msgspec.structs.replace(call, args={"a": call.args["a"] * 2, "b": 0})

    provider = ScriptedProvider(Reply(tool_calls=[("add", {"a": 4, "b": 1})]), Reply("ok"))
    chat_client = client(provider, tools=[add], middleware=[Double()])
    events = await collect(chat_client.chat("4+1?"))
    (result,) = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert result.result == "8"
