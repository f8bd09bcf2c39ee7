"""Properties of the Anthropic provider, against the fake Messages API on 127.0.0.1.

- A tool round trip with thinking keeps every thinking block and its signature, whatever
  they hold, and sends them back first in the assistant message, byte for byte (the fake
  refuses a signature it did not send, as the API does).
- Any split of the SSE body gives the same events (Property 15, for this wire).
- Any history of user turns, replies and parallel calls is sent as messages the API
  accepts: roles alternate, no empty block, every ``tool_use`` answered in the next
  message, in order (Property 12's half that matters: the API's reading of it).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ollm
from ollm_anthropic import AnthropicProvider, messages_of
from ollm_testutils import AnthropicReply, AnthropicThinking, AnthropicToolUse, FakeAnthropicServer

from .conftest import KEY, MODEL


@pytest.fixture(scope="module")
def shared() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(api_key=KEY) as server:
        yield server


texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=16)
# Signatures are opaque: base64 in practice, anything printable here.
signatures = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1)


@ollm.tool
def echo(word: str) -> str:
    """Say the word back."""
    return word


@st.composite
def thinking_replies(draw: st.DrawFn) -> list[AnthropicThinking]:
    blocks = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            blocks.append(AnthropicThinking(redacted=draw(signatures)))
        else:
            pieces = draw(st.lists(texts, min_size=1, max_size=3))
            blocks.append(AnthropicThinking(pieces, signature=draw(signatures)))
    return blocks


def expected_blocks(blocks: list[AnthropicThinking]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in blocks:
        if block.redacted is not None:
            out.append({"type": "redacted_thinking", "data": block.redacted})
        else:
            out.append(
                {
                    "type": "thinking",
                    "thinking": "".join(block.pieces),
                    "signature": block.signature,
                }
            )
    return out


@given(blocks=thinking_replies(), calls=st.integers(1, 3))
def test_thinking_signatures_go_back_unchanged_in_a_tool_round_trip(
    shared: FakeAnthropicServer, blocks: list[AnthropicThinking], calls: int
) -> None:
    shared.reset()
    uses = [AnthropicToolUse("echo", {"word": f"w{n}"}) for n in range(calls)]
    shared.script(AnthropicReply(thinking=blocks, tool_uses=uses), AnthropicReply("done"))

    async def go() -> list[ollm.ChatEvent]:
        async with AnthropicProvider(KEY, base_url=shared.url, environ={}) as provider:
            client = ollm.ChatClient(
                ollm.Registries(), provider=provider, model=MODEL, tools=[echo], think=True
            )
            async with client.chat("go") as events:
                return [e async for e in events]

    events = anyio.run(go)
    assert not [e for e in events if isinstance(e, ollm.ErrorEvent)], events
    second = shared.message_requests[1].json["messages"][1]["content"]
    assert second[: len(blocks)] == expected_blocks(blocks)
    assert [b["type"] for b in second[len(blocks) :]] == ["tool_use"] * calls


@given(data=st.data())
def test_any_split_of_the_body_gives_the_same_events(
    shared: FakeAnthropicServer, data: st.DataObject
) -> None:
    shared.reset()
    pieces = data.draw(st.lists(texts, min_size=1, max_size=4))
    thinking = data.draw(st.lists(texts, max_size=2))
    reply = AnthropicReply(
        pieces,
        thinking=[AnthropicThinking(thinking, signature="s")] if thinking else (),
        tool_uses=[("echo", {"word": data.draw(texts)})],
    )
    shared.script(reply, reply)
    whole = _events(shared)
    body = _raw_body(shared)
    cuts = sorted(data.draw(st.lists(st.integers(1, len(body) - 1), max_size=10, unique=True)))
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    shared.script(AnthropicReply(raw=chunks))
    split = _events(shared)
    assert _shape(split) == _shape(whole)


def _raw_body(server: FakeAnthropicServer) -> bytes:
    """The bytes of the next reply's body, as the server writes them."""
    reply = httpx.post(
        f"{server.url}/v1/messages",
        json={
            "model": MODEL,
            "max_tokens": 10,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
        headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
    )
    return reply.content


def _events(server: FakeAnthropicServer) -> list[ollm.ProviderEvent]:
    async def go() -> list[ollm.ProviderEvent]:
        async with AnthropicProvider(KEY, base_url=server.url, environ={}) as provider:
            request = ollm.ProviderRequest(model=MODEL, messages=(ollm.Message.user("hi"),))
            return [e async for e in provider.chat_stream(request)]

    return anyio.run(go)


def _shape(events: list[ollm.ProviderEvent]) -> list[Any]:
    out: list[Any] = []
    for event in events:
        if isinstance(event, ollm.ToolCallEvent):
            out.append(("call", event.call.name, event.call.args, event.call.signature))
        elif isinstance(event, ollm.FinishEvent):
            out.append(("finish", event.reason))
        else:
            out.append(event)
    return out


@st.composite
def histories(draw: st.DrawFn) -> list[ollm.Message]:
    messages: list[ollm.Message] = []
    for turn in range(draw(st.integers(1, 4))):
        messages.append(ollm.Message.user(draw(st.sampled_from(["", "q"])) or "q"))
        calls = draw(st.integers(0, 3))
        text = draw(st.sampled_from(["", "a"]))
        tool_calls = tuple(
            ollm.ToolCall(f"toolu_{turn}_{n}", "echo", {"word": "x"}) for n in range(calls)
        )
        messages.append(
            ollm.Message.assistant(text, tool_calls=tool_calls)
            if calls or text
            else ollm.Message.assistant("a")
        )
        for call in tool_calls:
            messages.append(
                ollm.Message(
                    role="tool",
                    parts=(ollm.TextPart(draw(st.sampled_from(["", "r"]))),),
                    name="echo",
                    tool_call_id=call.id,
                    is_error=draw(st.booleans()),
                )
            )
    messages.append(ollm.Message.user("last"))
    return messages


@given(history=histories())
def test_any_history_is_sent_as_messages_the_api_accepts(
    shared: FakeAnthropicServer, history: list[ollm.Message]
) -> None:
    shared.reset()
    request = ollm.ProviderRequest(model=MODEL, messages=tuple(history), tools=(echo.schema,))
    sent = messages_of(request)
    roles = [m["role"] for m in sent]
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert roles[0] == "user"

    async def go() -> list[ollm.ProviderEvent]:
        async with AnthropicProvider(KEY, base_url=shared.url, environ={}) as provider:
            return [e async for e in provider.chat_stream(request)]

    events = anyio.run(go)
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert not errors, (errors, json.dumps(sent))
