"""What llama-cpp-python's real server showed (issue 41): typed output without
``json_schema``, a native tool round trip, per-engine option names, usage it never sends."""

from __future__ import annotations

import anyio
import pytest
from llama_server import LlamaServer
from runtime_helpers import assert_history_valid

import ollm
from ollm_openai import OpenAIProvider

from .conftest import client_for, errors_of, events_of
from .test_python_api import PROMPT, sdk_chunks

pytestmark = [pytest.mark.anyio, pytest.mark.realserver]


def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


async def test_a_native_tool_round_trip(anyio_backend: str, provider: OpenAIProvider) -> None:
    # The server calls a tool only when the choice forces it (a grammar); the follow-up
    # must go back with "auto" and the assistant's content a string.
    client = client_for(provider, tools=[add], tool_choice="add", max_turns=4)
    events = await events_of(client, "What is 2 plus 3? Use the tool.")
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert not errors_of(events), events
    assert len(results) == 1
    assert events[-1].reason == "stop"  # type: ignore[union-attr]
    assert_history_valid(client.conversation)
    roles = [m.role for m in client.conversation]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_repeat_penalty_reaches_the_server_under_its_own_name(
    anyio_backend: str, llama_server: LlamaServer, provider: OpenAIProvider
) -> None:
    prompt = "Repeat after me: red red red red red red red red"
    penalised = ollm.GenerationOptions(temperature=0.0, max_tokens=24, seed=1, repeat_penalty=1.8)
    ours = await client_for(provider, options=penalised).run(prompt)
    plain = await client_for(provider).run(prompt)

    def theirs() -> str:
        fields = {"temperature": 0.0, "max_tokens": 24, "seed": 1}
        extra = {"repeat_penalty": 1.8}
        return "".join(sdk_chunks(llama_server, prompt, extra_body=extra, **fields))

    assert ours.text == await anyio.to_thread.run_sync(theirs)
    assert ours.text != plain.text  # the server used it


async def test_a_streamed_reply_has_ollms_estimated_usage(
    anyio_backend: str, provider: OpenAIProvider
) -> None:
    result = await client_for(provider).run(PROMPT)
    assert result.usage.estimated is True
    assert result.usage.prompt_tokens > 0
    assert result.usage.completion_tokens > 0
