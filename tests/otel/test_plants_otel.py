"""Span attributes that follow the request rather than the chat's events: the server's
default port, the output type, a cancelled chat. Bugs planted by hand that the first
tests let through (tests/plants.toml, module ``otel``)."""

from __future__ import annotations

import json

import pytest
from otel_helpers import Telemetry

import ollm
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


class AtAddress(ScriptedProvider):
    """A scripted provider that says where its server is, as HTTP providers do."""

    url = "https://api.example.com/v1"


async def test_an_address_without_a_port_has_its_schemes(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    client = ollm.ChatClient(
        ollm.Registries(), provider=AtAddress("hi"), middleware=[telemetry.otel()]
    )
    async with client:
        assert (await client.run("hello")).ok
    (span,) = telemetry.named("chat")
    attributes = dict(span.attributes or {})
    assert (attributes["server.address"], attributes["server.port"]) == ("api.example.com", 443)


async def test_the_output_type_says_json_when_the_request_asks_for_it(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    client = ollm.ChatClient(
        ollm.Registries(),
        provider=ScriptedProvider('{"n": 1}', "plain"),
        middleware=[telemetry.otel()],
    )
    async with client:
        assert await client.run("a number", output=schema) == {"n": 1}
        assert (await client.run("words")).ok
    typed, plain = sorted(telemetry.named("chat"), key=lambda s: s.start_time or 0)
    assert (typed.attributes or {})["gen_ai.output.type"] == "json"
    assert (plain.attributes or {})["gen_ai.output.type"] == "text"


async def test_a_chat_cancelled_mid_reply_marks_its_request_cancelled(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    client = ollm.ChatClient(
        ollm.Registries(),
        provider=ScriptedProvider(Reply(["one ", "two ", "three"])),
        middleware=[telemetry.otel()],
    )
    async with client, client.chat("count") as stream:
        events = []
        async for event in stream:
            events.append(event)
            if isinstance(event, ollm.TextEvent):
                stream.abort()
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.reason == "cancelled"
    (span,) = telemetry.named("chat")
    assert (span.attributes or {}).get("error.type") == "cancelled"


async def test_content_over_its_cap_keeps_the_newest_messages(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    client = ollm.ChatClient(
        ollm.Registries(),
        provider=ScriptedProvider(*[f"answer {n}" for n in range(6)]),
        middleware=[telemetry.otel(capture_content=True, content_limit=400)],
    )
    async with client:
        for n in range(6):
            assert (await client.run(f"question {n}: " + "words " * 10)).ok
    last = max(telemetry.named("chat"), key=lambda s: s.start_time or 0)
    sent = json.loads(str((last.attributes or {})["gen_ai.input.messages"]))
    assert 1 < len(sent) < 11  # some were left out to fit
    assert sent[-1]["parts"][0]["content"].startswith("question 5:")
    texts = [m["parts"][0]["content"] for m in sent]
    assert not any(text.startswith("question 0:") for text in texts)


async def test_a_tool_that_returns_an_error_result_is_an_error_span(
    anyio_backend: str, telemetry: Telemetry
) -> None:
    def check(path: str) -> ollm.ToolResult:
        """Check a path.

        Args:
            path: The path.
        """
        return ollm.ToolResult(f"{path} is broken", is_error=True)

    provider = ScriptedProvider(Reply(tool_calls=[("check", {"path": "/tmp"})]), "It is broken.")
    client = ollm.ChatClient(
        ollm.Registries(), provider=provider, tools=[check], middleware=[telemetry.otel()]
    )
    async with client:
        assert (await client.run("check /tmp")).ok
    (span,) = telemetry.named("execute_tool")
    assert (span.attributes or {}).get("error.type") == "TOOL_FAILED"
