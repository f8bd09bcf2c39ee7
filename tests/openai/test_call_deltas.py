"""Tool calls as the model writes them: ``tool_call_deltas=True`` streams each piece of an
OpenAI-compatible server's tool calls as a ``ToolCallDeltaEvent`` before the whole call;
a chat that does not ask gets none, and the request sent is the same."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from typing import Any

import pytest
from cli_helpers import OLLM, ollm_env

import ollm
from ollm_openai import OpenAIProvider
from ollm_testutils import FakeOpenAIServer, OpenAIReply, OpenAIToolCall

from .conftest import MODEL, chat_events, client_for

pytestmark = pytest.mark.anyio

ARGS = {"city": "Paris", "units": "celsius", "days": 3}


def weather(city: str, units: str, days: int) -> str:
    """The weather.

    Args:
        city: Where.
        units: How.
        days: How many.
    """
    return "sunny"


def deltas(events: list[ollm.ChatEvent]) -> list[ollm.ToolCallDeltaEvent]:
    return [e for e in events if isinstance(e, ollm.ToolCallDeltaEvent)]


@pytest.mark.parametrize("framing", ["split", "interleaved", "whole"])
async def test_each_piece_comes_as_it_is_written_then_the_whole_call(
    server: FakeOpenAIServer, provider: OpenAIProvider, framing: str
) -> None:
    calls = [
        OpenAIToolCall("weather", ARGS, id="call_a"),
        OpenAIToolCall("weather", {**ARGS, "city": "Oslo"}, id="call_b"),
    ]
    server.script(OpenAIReply(tool_calls=calls, tool_call_framing=framing), OpenAIReply("Sunny."))  # type: ignore[arg-type]
    client = client_for(provider, tools=[weather], tool_call_deltas=True)
    events = await chat_events(client, "weather?")
    pieces = deltas(events)
    assert pieces
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ToolCallDeltaEvent") < kinds.index("ToolCallStartEvent")
    written: dict[int, str] = defaultdict(str)
    heads: dict[int, tuple[str | None, str | None]] = {}
    for piece in pieces:
        written[piece.index] += piece.arguments_delta
        if piece.id is not None or piece.name is not None:
            assert piece.index not in heads  # the id and name come once, first
            heads[piece.index] = (piece.id, piece.name)
    assert heads == {0: ("call_a", "weather"), 1: ("call_b", "weather")}
    assert [json.loads(written[i]) for i in (0, 1)] == [ARGS, {**ARGS, "city": "Oslo"}]
    starts = [e.call for e in events if isinstance(e, ollm.ToolCallStartEvent)]
    assert [c.args for c in starts] == [ARGS, {**ARGS, "city": "Oslo"}]


async def test_a_chat_that_does_not_ask_gets_none_and_sends_the_same(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    reply = OpenAIReply(tool_calls=[OpenAIToolCall("weather", ARGS, id="call_a")])
    server.script(reply, OpenAIReply("Sunny."), reply, OpenAIReply("Sunny."))
    plain = await chat_events(client_for(provider, tools=[weather]), "weather?")
    asked = await chat_events(
        client_for(provider, tools=[weather], tool_call_deltas=True), "weather?"
    )
    assert deltas(plain) == []
    assert deltas(asked)
    others = [e for e in asked if not isinstance(e, ollm.ToolCallDeltaEvent)]
    assert [type(e) for e in others] == [type(e) for e in plain]
    first, _, second, _ = server.chat_requests
    assert first.json == second.json


async def test_a_middleware_sees_them_and_they_encode_as_json_lines(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    seen: list[Any] = []

    class Watch:
        def on_event(self, ctx: Any, event: ollm.ChatEvent) -> Any:
            if isinstance(event, ollm.ToolCallDeltaEvent):
                seen.append(event)
            return event

    server.script(OpenAIReply(tool_calls=[OpenAIToolCall("weather", ARGS)]), OpenAIReply("Ok."))
    client = client_for(provider, tools=[weather], middleware=[Watch()])
    events = await chat_events(client, "weather?", tool_call_deltas=True)
    assert seen == deltas(events)
    for piece in seen:
        assert ollm.decode_chat_event(ollm.encode_event(piece)) == piece


def test_the_command_line_shows_them_with_call_deltas(server: FakeOpenAIServer) -> None:
    server.script(
        OpenAIReply(tool_calls=[OpenAIToolCall("current_time", {})]), OpenAIReply("Noon.")
    )
    done = subprocess.run(
        [
            OLLM,
            "chat",
            "-p",
            "openai",
            "-m",
            MODEL,
            "-t",
            "current_time",
            "--call-deltas",
            "--json",
            "time?",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=ollm_env(OPENAI_BASE_URL=server.base_url),
    )
    assert done.returncode == 0, done.stderr
    types = [json.loads(line)["type"] for line in done.stdout.splitlines()]
    assert types.index("tool_call_delta") < types.index("tool_call_start")
