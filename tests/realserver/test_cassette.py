"""A cassette recorded against llama-cpp-python's real server, replayed with that server
stopped: the same events, through the production OpenAI provider over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from llama_server import MODEL, LlamaServer

import ollm
from ollm_openai import OpenAIProvider
from ollm_testutils.cassette import Cassette, CassetteMiss

from .conftest import MAX_TOKENS, events_of, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.realserver]

PROMPT = "Name three colours of the rainbow."


def client_on(url: str) -> ollm.ChatClient:
    options = ollm.GenerationOptions(temperature=0.0, max_tokens=MAX_TOKENS, seed=1)
    provider = OpenAIProvider(url, model=MODEL, environ={})
    return ollm.ChatClient(ollm.Registries(), provider=provider, model=MODEL, options=options)


def without_timings(events: list[Any]) -> list[Any]:
    timed = {"usage", "duration_ms"}
    return [{k: v for k, v in msgspec.to_builtins(e).items() if k not in timed} for e in events]


async def test_recorded_on_the_real_server_replays_with_it_stopped(
    own_server: LlamaServer, tmp_path: Path
) -> None:
    path = tmp_path / "rainbow.json"
    upstream = own_server.base_url
    with Cassette(path, mode="all") as cassette:
        recorded = await events_of(client_on(cassette.url(upstream, wire="openai")), PROMPT)
    assert text_of(recorded).strip()
    assert isinstance(recorded[-1], ollm.FinishEvent)
    assert recorded[-1].reason in ("stop", "length")

    own_server.stop()
    assert not own_server.answers()
    with Cassette(path) as replay:
        replayed = await events_of(client_on(replay.url(upstream, wire="openai")), PROMPT)
        changed = await events_of(client_on(replay.url(upstream, wire="openai")), "Name two.")
    assert without_timings(replayed) == without_timings(recorded)
    assert any(isinstance(e, ollm.ErrorEvent) for e in changed)
    with pytest.raises(CassetteMiss) as miss:
        replay.check()
    assert f'-        "content": "{PROMPT}",' in str(miss.value)
    assert '+        "content": "Name two.",' in str(miss.value)
