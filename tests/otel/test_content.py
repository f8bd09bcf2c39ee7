"""Message content on the spans: only when asked for, in the conventions' JSON shapes,
capped per attribute, and as the history keeps it (after ``redact``)."""

from __future__ import annotations

import json

import pytest
from otel_helpers import KEY, Telemetry, chat

from ollm.middleware import Redact
from ollm_otel import CAPTURE_CONTENT_ENV, Otel
from ollm_otel._content import CUT

CONTENT = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
)


def attributes(telemetry: Telemetry) -> dict[str, list[object]]:
    found: dict[str, list[object]] = {}
    for span in telemetry.spans():
        for key, value in (span.attributes or {}).items():
            found.setdefault(key, []).append(value)
    return found


@pytest.mark.anyio
async def test_no_content_is_recorded_unless_asked_for(telemetry: Telemetry) -> None:
    assert (await chat(telemetry.otel())).ok
    found = attributes(telemetry)
    assert [key for key in CONTENT if key in found] == []
    assert all("Paris" not in str(v) for values in found.values() for v in values)


@pytest.mark.anyio
async def test_the_variable_turns_content_on(telemetry: Telemetry) -> None:
    otel = Otel(
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        environ={CAPTURE_CONTENT_ENV: "true"},
    )
    assert otel.capture_content
    assert not Otel(environ={CAPTURE_CONTENT_ENV: "false"}).capture_content
    assert not Otel(environ={}).capture_content
    assert (await chat(otel)).ok
    first, second = sorted(telemetry.named("chat"), key=lambda s: s.start_time or 0)
    asked = json.loads(str(first.attributes["gen_ai.input.messages"]))
    assert asked == [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
    assert json.loads(str(first.attributes["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "Be brief."}
    ]
    [called] = json.loads(str(first.attributes["gen_ai.output.messages"]))
    assert called["role"] == "assistant"
    assert called["finish_reason"] == "tool_call"
    assert [(p["type"], p["name"], p["arguments"]) for p in called["parts"]] == [
        ("tool_call", "lookup", {"city": "Paris"})
    ]
    history = json.loads(str(second.attributes["gen_ai.input.messages"]))
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    assert history[2]["parts"][0]["type"] == "tool_call_response"
    assert history[2]["parts"][0]["id"] == called["parts"][0]["id"]
    [answer] = json.loads(str(second.attributes["gen_ai.output.messages"]))
    assert answer["finish_reason"] == "stop"
    assert answer["parts"][0]["content"].startswith("Sunny.")
    [tool] = telemetry.named("execute_tool")
    assert json.loads(str(tool.attributes["gen_ai.tool.call.arguments"])) == {"city": "Paris"}
    assert str(tool.attributes["gen_ai.tool.call.result"]).startswith("Paris: sunny")


@pytest.mark.anyio
async def test_content_is_capped_and_stays_json(telemetry: Telemetry) -> None:
    limit = 300
    otel = telemetry.otel(capture_content=True, content_limit=limit)
    assert (await chat(otel, prompt="Weather in Paris? " + "Tell me more. " * 500)).ok
    values = attributes(telemetry)
    for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
        for value in values[key]:
            assert len(str(value)) <= limit
            json.loads(str(value))
    first = sorted(telemetry.named("chat"), key=lambda s: s.start_time or 0)[0]
    [prompt] = json.loads(str(first.attributes["gen_ai.input.messages"]))
    assert prompt["parts"][0]["content"].endswith(CUT)
    [tool] = telemetry.named("execute_tool")
    assert len(str(tool.attributes["gen_ai.tool.call.result"])) <= limit


@pytest.mark.anyio
@pytest.mark.parametrize("otel_first", [True, False])
async def test_content_is_recorded_after_redact(telemetry: Telemetry, otel_first: bool) -> None:
    otel = telemetry.otel(capture_content=True)
    layers = [otel, Redact()] if otel_first else [Redact(), otel]
    result = await chat(*layers)
    assert result.ok
    found = attributes(telemetry)
    assert found["gen_ai.tool.call.result"]
    assert found["gen_ai.output.messages"]
    assert all(KEY not in str(v) for values in found.values() for v in values)
    assert "[REDACTED]" in str(found["gen_ai.tool.call.result"])
