"""ollm and the official ``anthropic`` SDK read the same events from FakeAnthropicServer.

Each scenario is played twice by the same server, once to the SDK (its raw stream of
events, accumulated as its own ``MessageStream`` does) and once to ollm's provider, and
both are reduced to one shape: the text and thinking pieces in order, each thinking
block's signature, the tool calls (id, name, parsed input), the stop reason and usage, and
a mid-stream error's words. The SDK is the oracle of the fake (it parses what the fake
sends) and of ollm (ollm reads the same).
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

import ollm
from ollm_anthropic import AnthropicProvider
from ollm_anthropic._convert import thinking_blocks
from ollm_testutils import AnthropicReply, AnthropicThinking, AnthropicToolUse, FakeAnthropicServer

from .conftest import KEY, MODEL, provider_for, request_for

pytestmark = pytest.mark.anyio

Seen = dict[str, Any]

SCENARIOS: dict[str, AnthropicReply] = {
    "text": AnthropicReply(["Hel", "lo", ", wörld ✓"], usage=(21, 5)),
    "thinking": AnthropicReply(
        ["Paris."],
        thinking=[
            AnthropicThinking(["Let me ", "think."], signature="EqQBCkYIBxgCKkA+sig/1=="),
            AnthropicThinking(["More."], signature="Eq2"),
        ],
        usage=(30, 12),
    ),
    "parallel tool use": AnthropicReply(
        "Checking both.",
        thinking=[AnthropicThinking("Two cities.", signature="sig-tools")],
        tool_uses=[
            AnthropicToolUse("weather", {"city": "Paris"}, id="toolu_01", pieces=4),
            AnthropicToolUse("weather", {"city": "Oslo", "units": ["C"]}, id="toolu_02"),
        ],
        usage=(40, 20),
    ),
    "error mid-stream": AnthropicReply(
        ["Half ", "an answer"],
        midstream_error={"type": "overloaded_error", "message": "Overloaded"},
    ),
    "max tokens": AnthropicReply(["Cut"], stop_reason="max_tokens", usage=(5, 1)),
}
STOPS = {"end_turn": "stop", "tool_use": "stop", "max_tokens": "length"}


async def sdk_seen(server: FakeAnthropicServer) -> Seen:
    """What the SDK reads: its raw events, accumulated."""
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.url, max_retries=0)
    seen: Seen = {"pieces": [], "signatures": [], "calls": [], "stop": None, "error": None}
    inputs: dict[int, list[str]] = {}
    ids: dict[int, tuple[str, str]] = {}
    usage: dict[str, int] = {}
    try:
        stream = await client.messages.create(
            model=MODEL,
            max_tokens=1024,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        async for event in stream:
            if event.type == "message_start":
                usage["input"] = event.message.usage.input_tokens
            elif event.type == "content_block_start" and event.content_block.type == "tool_use":
                ids[event.index] = (event.content_block.id, event.content_block.name)
                inputs[event.index] = []
            elif event.type == "content_block_delta":
                delta = event.delta
                if delta.type == "text_delta":
                    seen["pieces"].append(("text", delta.text))
                elif delta.type == "thinking_delta":
                    seen["pieces"].append(("thinking", delta.thinking))
                elif delta.type == "signature_delta":
                    seen["signatures"].append(delta.signature)
                elif delta.type == "input_json_delta":
                    inputs[event.index].append(delta.partial_json)
            elif event.type == "content_block_stop" and event.index in ids:
                call_id, name = ids[event.index]
                seen["calls"].append((call_id, name, json.loads("".join(inputs[event.index]))))
            elif event.type == "message_delta":
                seen["stop"] = STOPS[event.delta.stop_reason or ""]
                usage["output"] = event.usage.output_tokens
    except anthropic.APIStatusError as exc:
        seen["error"] = exc.message
    finally:
        await client.close()
    seen["usage"] = (usage.get("input"), usage.get("output")) if seen["error"] is None else None
    if seen["error"] is not None:
        seen["stop"] = None
    return seen


async def ollm_seen(provider: AnthropicProvider) -> Seen:
    """What ollm's provider reads, in the same shape."""
    seen: Seen = {"pieces": [], "signatures": [], "calls": [], "stop": None, "error": None}
    calls: list[ollm.ToolCall] = []
    async for event in provider.chat_stream(request_for()):
        if isinstance(event, ollm.TextEvent):
            seen["pieces"].append(("text", event.text))
        elif isinstance(event, ollm.ThinkingEvent):
            seen["pieces"].append(("thinking", event.text))
        elif isinstance(event, ollm.ToolCallEvent):
            calls.append(event.call)
        elif isinstance(event, ollm.ErrorEvent):
            seen["error"] = event.message
        elif isinstance(event, ollm.FinishEvent):
            seen["stop"] = event.reason
            usage = event.usage
            seen["usage"] = (usage.prompt_tokens, usage.completion_tokens) if usage else None
    seen["calls"] = [(c.id, c.name, c.args) for c in calls]
    seen.setdefault("usage", None)
    return seen


def signatures_of(provider_calls: list[ollm.ToolCall]) -> list[str]:
    return [b["signature"] for b in thinking_blocks(provider_calls[0])] if provider_calls else []


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_the_sdk_and_ollm_read_the_same_events(
    server: FakeAnthropicServer, scenario: str
) -> None:
    reply = SCENARIOS[scenario]
    server.script(reply, reply)
    theirs = await sdk_seen(server)
    async with provider_for(server) as provider:
        ours = await ollm_seen(provider)
    assert ours["pieces"] == theirs["pieces"]
    assert ours["calls"] == theirs["calls"]
    assert ours["stop"] == theirs["stop"]
    assert ours["usage"] == theirs["usage"]
    if theirs["error"] is None:
        assert ours["error"] is None
    else:
        # Both quote the API's words for the error event.
        assert "Overloaded" in theirs["error"]
        assert "Overloaded" in ours["error"]
        assert ours["pieces"] == [("text", "Half "), ("text", "an answer")]


async def test_the_signatures_ollm_keeps_are_those_the_sdk_reads(
    server: FakeAnthropicServer,
) -> None:
    reply = SCENARIOS["parallel tool use"]
    server.script(reply, reply)
    theirs = await sdk_seen(server)
    async with provider_for(server) as provider:
        calls = [
            e.call
            async for e in provider.chat_stream(request_for())
            if isinstance(e, ollm.ToolCallEvent)
        ]
    assert signatures_of(calls) == theirs["signatures"] == ["sig-tools"]


async def test_the_sdk_reads_a_whole_message_the_fake_sends_without_streaming(
    server: FakeAnthropicServer,
) -> None:
    server.script(SCENARIOS["parallel tool use"])
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.url, max_retries=0)
    try:
        message = await client.messages.create(
            model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "hi"}]
        )
    finally:
        await client.close()
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert message.content[3].input == {"city": "Oslo", "units": ["C"]}  # type: ignore[union-attr]
    assert message.stop_reason == "tool_use"


async def test_the_sdk_raises_the_same_family_for_an_error_reply(
    server: FakeAnthropicServer,
) -> None:
    server.script(AnthropicReply.failure(404, "not_found_error", "model: claude-x"))
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.url, max_retries=0)
    try:
        with pytest.raises(anthropic.NotFoundError):
            await client.messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
    finally:
        await client.close()
