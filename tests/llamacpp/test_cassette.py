"""The model inside the process recorded in a cassette at the level of its events, and
replayed without loading it: the same events."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from llamacpp_helpers import MODEL

import ollm
from ollm_llamacpp import LlamaCppProvider
from ollm_testutils.cassette import Cassette

pytestmark = pytest.mark.anyio

OPTIONS = ollm.GenerationOptions(temperature=0.0, max_tokens=16)


def never_built() -> LlamaCppProvider:
    raise AssertionError("a replay must not load the model")


async def test_the_models_events_replay_without_the_model(
    provider: LlamaCppProvider, tmp_path: Path
) -> None:
    path = tmp_path / "local.json"
    with Cassette(path, mode="all") as cassette:
        local = cassette.provider(lambda: provider, name="llamacpp")
        client = ollm.ChatClient(ollm.Registries(), provider=local, model=MODEL, options=OPTIONS)
        async with client.chat("What is 2+2?") as stream:
            recorded = [event async for event in stream]
    assert "".join(e.text for e in recorded if isinstance(e, ollm.TextEvent)).strip()
    with Cassette(path) as replay:
        local = replay.provider(never_built, name="llamacpp")
        client = ollm.ChatClient(ollm.Registries(), provider=local, model=MODEL, options=OPTIONS)
        async with client.chat("What is 2+2?") as stream:
            replayed = [event async for event in stream]
    replay.check()
    timed = {"usage", "duration_ms"}

    def plain(events: list[ollm.ChatEvent]) -> list[dict[str, object]]:
        return [{k: v for k, v in msgspec.to_builtins(e).items() if k not in timed} for e in events]

    assert plain(replayed) == plain(recorded)
