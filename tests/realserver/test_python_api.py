"""ollm's Python API against llama-cpp-python's real OpenAI-compatible server, beside the
official ``openai`` SDK sending the same requests."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from llama_server import MODEL, LlamaServer
from openai import OpenAI
from runtime_helpers import assert_history_valid

import ollm
from ollm_openai import OpenAIProvider
from ollm_pool import Member, PoolProvider

from .conftest import MAX_TOKENS, client_for, errors_of, events_of

pytestmark = [pytest.mark.anyio, pytest.mark.realserver]

PROMPT = "Name three colours of the rainbow."
# Over the server's window (1,024 tokens), well under ollm's default of 4,096.
OVER = "Summarise this text. " + "the quick brown fox jumps over the lazy dog " * 160


def sdk_chunks(server: LlamaServer, prompt: str, **fields: Any) -> list[str]:
    """The text pieces of one streamed chat through the openai SDK (in a worker thread:
    the SDK's sync client runs whatever the event loop)."""
    client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
    with client:
        stream = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": prompt}],
            stream=True,
            **fields,
        )
        return [
            c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content
        ]


async def test_streamed_text_is_the_openai_sdks_token_for_token(
    anyio_backend: str, llama_server: LlamaServer, provider: OpenAIProvider
) -> None:
    events = await events_of(client_for(provider), PROMPT)
    ours = [e.text for e in events if isinstance(e, ollm.TextEvent)]
    theirs = await anyio.to_thread.run_sync(
        lambda: sdk_chunks(llama_server, PROMPT, temperature=0.0, max_tokens=MAX_TOKENS, seed=1)
    )
    assert not errors_of(events), events
    assert ours == theirs
    assert len(ours) > 1  # it streamed
    assert events[-1].reason in ("stop", "length")  # type: ignore[union-attr]


async def test_a_whole_reply_has_the_servers_usage(
    anyio_backend: str, llama_server: LlamaServer
) -> None:
    async with OpenAIProvider(llama_server.base_url, stream=False, environ={}) as provider:
        result = await client_for(provider).run(PROMPT)
    assert result.text
    assert result.usage.prompt_tokens > 0
    assert result.usage.completion_tokens > 0


async def test_a_streamed_prompt_over_the_window_names_its_size(
    anyio_backend: str, provider: OpenAIProvider
) -> None:
    client = client_for(provider)
    events = await events_of(client, OVER)
    (error,) = errors_of(events)
    assert error.code == "STREAM_INTERRUPTED", error.message
    assert "closed the stream without a reply" in error.message
    assert "the prompt was about" in error.message
    assert "shorten it or raise the window" in error.message
    assert_history_valid(client.conversation)
    assert client.conversation.messages == (ollm.Message.user(OVER),)


async def test_a_prompt_over_the_window_not_streamed_is_context_exceeded_sent_once(
    anyio_backend: str, llama_server: LlamaServer
) -> None:
    async with OpenAIProvider(llama_server.base_url, stream=False, environ={}) as provider:
        client = client_for(provider, compact="auto")
        events = await events_of(client, OVER)
    (error,) = errors_of(events)
    assert error.code == "CONTEXT_EXCEEDED", error.message
    assert "was not sent again" in error.message
    assert events[-1].reason == "error"  # type: ignore[union-attr]
    assert_history_valid(client.conversation)


async def test_a_server_killed_mid_stream_is_stream_interrupted_with_history_intact(
    anyio_backend: str, own_server: LlamaServer
) -> None:
    async with OpenAIProvider(own_server.base_url, environ={}) as provider:
        client = client_for(provider)
        events: list[ollm.ChatEvent] = []
        options = ollm.GenerationOptions(temperature=0.0, max_tokens=400, seed=1)
        async with client.chat("Count from 1 to 200: 1, 2, 3,", options=options) as stream:
            async for event in stream:
                events.append(event)
                if isinstance(event, ollm.TextEvent) and own_server.process is not None:
                    own_server.kill()  # after the first piece of text
    codes = [e.code for e in errors_of(events)]
    assert codes in (["STREAM_INTERRUPTED"], ["CONNECTION_FAILED"]), events
    assert events[-1].reason == "error"  # type: ignore[union-attr]
    assert_history_valid(client.conversation)
    assert client.conversation.messages[0].text.startswith("Count from 1")


async def test_a_pool_of_two_servers_with_one_killed_answers(
    anyio_backend: str, llama_server: LlamaServer, own_server: LlamaServer
) -> None:
    alive = OpenAIProvider(llama_server.base_url, environ={})
    dead = OpenAIProvider(own_server.base_url, environ={})
    async with PoolProvider([Member(dead, name="dead"), Member(alive, name="alive")]) as pool:
        client = client_for(pool)
        first = await client.run("Say yes.")
        own_server.kill()
        # Each conversation goes to the member its id hashes to: new ones until one was
        # for the dead member (half of them are; twelve bound the wait).
        answers = []
        for _ in range(12):
            client.new_conversation()
            answers.append(await client.run("Say no."))
            dead_status = next(m for m in pool.status() if m.name == "dead")
            if dead_status.failures or dead_status.state != "closed":
                break
    assert first.text
    assert all(answer.text for answer in answers)
    assert dead_status.failures or dead_status.state != "closed", dead_status


async def test_embeddings_are_the_openai_sdks(
    anyio_backend: str, embedding_server: LlamaServer
) -> None:
    texts = ["a red apple", "the stock market fell"]
    async with OpenAIProvider(embedding_server.base_url, environ={}) as provider:
        result = await provider.embed(MODEL, texts)

    def sdk() -> list[list[float]]:
        with OpenAI(base_url=embedding_server.base_url, api_key="none", max_retries=0) as c:
            made = c.embeddings.create(model=MODEL, input=texts, encoding_format="float")
            return [item.embedding for item in sorted(made.data, key=lambda i: i.index)]

    theirs = await anyio.to_thread.run_sync(sdk)
    assert len(result.vectors) == 2
    assert len(result.vectors[0]) > 0
    assert result.vectors == theirs
    assert result.vectors[0] != result.vectors[1]
