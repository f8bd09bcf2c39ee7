"""A prompt over the server's window, streamed or not (issue 41, items 3 and 4).

Streamed, llama-cpp-python's server answers 200 and closes an empty stream at once
(``FakeOpenAIServer.empty_stream_over_window``): the error names the prompt's size, by
ollm's own count, against the window. Not streamed, every server refuses with 400: that
stays ``CONTEXT_EXCEEDED`` (``TOKEN_LIMIT`` means "refused before sending"), and a
request compaction cannot shorten is not sent a second time.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_helpers import OLLM, ollm_env
from runtime_helpers import assert_history_valid

import ollm
from ollm_openai import OpenAIProvider
from ollm_testutils import FakeOpenAIServer, OpenAIReply

from .conftest import MODEL, chat_events, client_for, error_of, provider_events, request_for

pytestmark = pytest.mark.anyio

LONG = "Tell me about this: " + "lorem ipsum dolor sit amet " * 200  # about 1,350 tokens
CONTEXT_FLAVORS = ("openai", "vllm", "llamacpp")


@pytest.fixture
def overflowing() -> FakeOpenAIServer:
    server = FakeOpenAIServer(flavor="llamacpp")
    server.context_window = 256
    server.empty_stream_over_window = True
    return server


async def test_an_empty_stream_for_a_long_prompt_names_its_size(
    anyio_backend: str, overflowing: FakeOpenAIServer
) -> None:
    async with overflowing, OpenAIProvider(overflowing.base_url, environ={}) as provider:
        client = client_for(provider)
        events = await chat_events(client, LONG, model=MODEL)
        # The same server answers a short prompt in a new conversation.
        after = await chat_events(client_for(provider), "hi", model=MODEL)
    error = error_of(events)
    assert error.code == "STREAM_INTERRUPTED", error.message
    tokens = ollm.kit.fallback_count(request_for(LONG))
    assert f"the prompt was about {tokens:,} tokens" in error.message
    assert "window is not known to ollm" in error.message
    assert "shorten it or raise the window" in error.message
    assert "closed early" not in error.message
    assert events[-1].reason == "error"  # type: ignore[union-attr]
    assert not [e for e in after if isinstance(e, ollm.ErrorEvent)]
    assert_history_valid(client.conversation)
    assert client.conversation.messages[0] == ollm.Message.user(LONG)


async def test_an_empty_stream_over_a_known_window_is_context_exceeded(
    anyio_backend: str, overflowing: FakeOpenAIServer
) -> None:
    options = ollm.GenerationOptions(context_window=512)
    async with overflowing, OpenAIProvider(overflowing.base_url, environ={}) as provider:
        error = error_of(await provider_events(provider, request_for(LONG, options=options)))
    assert error.code == "CONTEXT_EXCEEDED", error.message
    assert "and the model's window is 512" in error.message


async def test_a_stream_cut_after_some_text_still_reads_closed_early(
    anyio_backend: str,
) -> None:
    async with FakeOpenAIServer() as server:
        # Some text, then the body ends cleanly without a finish or [DONE].
        server.script(
            OpenAIReply(raw=[b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'])
        )
        async with OpenAIProvider(server.base_url, environ={}) as provider:
            error = error_of(await provider_events(provider, request_for("hi")))
    assert error.code == "STREAM_INTERRUPTED"
    assert "closed early" in error.message


@pytest.mark.parametrize("flavor", CONTEXT_FLAVORS)
async def test_a_refusal_not_streamed_stays_context_exceeded_and_is_sent_once(
    anyio_backend: str, flavor: str
) -> None:
    async with FakeOpenAIServer(flavor=flavor) as server:  # type: ignore[arg-type]
        server.context_window = 256
        async with OpenAIProvider(server.base_url, stream=False, environ={}) as provider:
            client = client_for(provider, compact="auto")
            events = await chat_events(client, LONG, model=MODEL)
        sent = len(server.chat_requests)
    error = error_of(events)
    assert error.code == "CONTEXT_EXCEEDED", error.message
    assert "was not sent again" in error.message
    assert sent == 1  # compacting could not shorten one message: not sent twice
    assert events[-1].reason == "error"  # type: ignore[union-attr]
    assert_history_valid(client.conversation)


def test_the_cli_does_not_send_a_refused_request_twice(tmp_path: Path) -> None:
    profiles = tmp_path / "openai.toml"
    with FakeOpenAIServer(flavor="vllm") as server:
        server.context_window = 256
        profiles.write_text(f'[whole]\nbase_url = "{server.base_url}"\nstream = false\n')
        result = subprocess.run(
            [OLLM, "chat", "-p", "openai:whole", "-m", MODEL, LONG],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            env=ollm_env(OLLM_OPENAI_PROFILES=str(profiles)),
        )
        sent = len(server.chat_requests)
    assert result.returncode != 0
    assert "CONTEXT_EXCEEDED" in result.stderr, result.stderr
    assert "TOKEN_LIMIT" not in result.stderr
    assert sent == 1
