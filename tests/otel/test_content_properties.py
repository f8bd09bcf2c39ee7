"""Whatever the messages and the cap, each content attribute is valid JSON within it."""

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from otel_helpers import Telemetry

import ollm
from ollm_otel import Otel
from ollm_testutils import Reply, ScriptedProvider

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)


@given(
    prompt=texts,
    history=st.lists(texts, max_size=6),
    answer=texts,
    limit=st.integers(64, 600),
)
def test_each_content_attribute_is_json_within_its_cap(
    prompt: str, history: list[str], answer: str, limit: int
) -> None:
    telemetry = Telemetry()
    earlier = [
        ollm.Message.user(text) if index % 2 == 0 else ollm.Message.assistant(text)
        for index, text in enumerate(history)
    ]
    client = ollm.ChatClient(
        ollm.Registries(),
        provider=ScriptedProvider(Reply(answer or "ok")),
        model="m",
        system=prompt or None,
        conversation=ollm.Conversation(earlier),
        middleware=[telemetry.otel(capture_content=True, content_limit=limit)],
    )
    result = anyio.run(client.run, prompt or "?")
    assert result.ok
    [request] = telemetry.named("chat")
    written = 0
    for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"):
        value = (request.attributes or {}).get(key)
        if value is None:
            continue
        written += 1
        assert len(str(value)) <= limit
        assert isinstance(json.loads(str(value)), list)
    assert written >= 2


def test_a_cap_too_small_for_any_message_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 64"):
        Otel(content_limit=10, environ={})
