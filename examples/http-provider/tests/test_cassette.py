"""The mini provider against what a real server once answered: a cassette.

The cassette (tests/cassettes/rainbow.json) was recorded once against a real
OpenAI-compatible server (llama-cpp-python's, on Gemma 3 270M) with

    MINI_BASE_URL=http://127.0.0.1:8000/v1 pytest --ollm-record=new_episodes tests/test_cassette.py

and is replayed since, with no server: through the fake OpenAI-compatible server of
ollm-testutils, over real HTTP, so the provider's own code runs. A change to the request
(the prompt, the options, the model) fails the test with the difference and that
command. In CI (``CI`` set) it only ever replays.
"""

from __future__ import annotations

import os

import pytest
from ollm_example_http.provider import MiniProvider

import ollm
from ollm_testutils.cassette import Cassette

pytestmark = pytest.mark.anyio

UPSTREAM = os.environ.get("MINI_BASE_URL", "http://127.0.0.1:8000/v1")
MODEL = "gemma-3-270m"


@pytest.mark.ollm_cassette("cassettes/rainbow.json")  # one file for both event loops
async def test_the_model_names_colours(ollm_cassette: Cassette) -> None:
    async with MiniProvider(ollm_cassette.url(UPSTREAM, wire="openai")) as provider:
        options = ollm.GenerationOptions(temperature=0.0, max_tokens=24, seed=1)
        client = ollm.ChatClient(ollm.Registries(), provider=provider, model=MODEL, options=options)
        result = await client.run("Name three colours of the rainbow.")
    assert result.error is None
    assert result.text.strip()
    assert result.finish_reason in ("stop", "length")
