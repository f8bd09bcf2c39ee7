"""Content on the spans goes through the chat's ``redact`` whatever the order of the two:
the system prompt and the request's messages too, which ``Otel`` reads before an inner
``redact`` has seen the request (issue 40, item 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from otel_helpers import KEY, Telemetry, lookup

import ollm
from ollm.middleware import Audit, Redact, redaction
from ollm_testutils import Reply, ScriptedProvider


def everything(telemetry: Telemetry) -> str:
    return " ".join(
        str(value) for span in telemetry.spans() for value in (span.attributes or {}).values()
    )


@pytest.mark.anyio
@pytest.mark.parametrize("otel_first", [True, False])
async def test_a_key_in_the_system_prompt_never_reaches_the_spans(
    telemetry: Telemetry, otel_first: bool
) -> None:
    otel = telemetry.otel(capture_content=True)
    layers = [otel, Redact()] if otel_first else [Redact(), otel]
    provider = ScriptedProvider(
        Reply(tool_calls=[("lookup", {"city": KEY})]), Reply(f"Done, {KEY}.")
    )
    client = ollm.ChatClient(
        ollm.Registries(),
        provider=provider,
        model="scripted",
        tools=[lookup],
        system=f"The key is {KEY}; never say it.",
        middleware=layers,
    )
    async with client:
        assert (await client.run("Weather?")).ok
    recorded = everything(telemetry)
    assert "The key is [REDACTED]; never say it." in recorded
    assert KEY[:12] not in recorded
    assert KEY[-12:] not in recorded
    # The model was sent the redacted prompt too.
    assert [r.system_prompt for r in provider.requests] == [
        "The key is [REDACTED]; never say it."
    ] * 2


@pytest.mark.anyio
async def test_redaction_is_the_chats_redact_or_nothing(tmp_path: Path) -> None:
    seen: list[object] = []

    class Probe:
        async def on_request(
            self, ctx: ollm.MiddlewareContext, request: ollm.ProviderRequest
        ) -> None:
            seen.append(redaction(ctx)({"text": f"a {KEY}", "n": 1}))

    for layers in (
        [Probe()],
        [Probe(), Redact(replacement="***")],
        [Audit(tmp_path / "a.jsonl"), Probe()],
    ):
        client = ollm.ChatClient(
            ollm.Registries(), provider=ScriptedProvider(Reply("ok")), middleware=layers
        )
        async with client:
            await client.run("hi")
    assert seen == [
        {"text": f"a {KEY}", "n": 1},
        {"text": "a ***", "n": 1},
        {"text": f"a {KEY}", "n": 1},
    ]
