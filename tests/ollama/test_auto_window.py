"""context_window="auto": Ollama's num_ctx in few buckets, grown to fit, never shrinking."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import ollm
from ollm_ollama import OllamaProvider
from ollm_testutils import FakeOllamaServer

pytestmark = pytest.mark.anyio

WORDS_PER_1K = 800  # "word " is 5 characters: 800 of them are 1,000 tokens at 4 a token


@pytest.fixture
async def server() -> AsyncIterator[FakeOllamaServer]:
    async with FakeOllamaServer(models=False) as built:
        built.add_model("big", capabilities=["completion", "tools"], context_length=131072)
        built.add_model("short", capabilities=["completion"], context_length=8192)
        built.context_overflow = "refuse"  # a window too small would be an error
        yield built


def _client(provider: OllamaProvider, model: str = "big") -> ollm.ChatClient:
    return ollm.ChatClient(ollm.Registries(), provider=provider, model=model, context_window="auto")


def _windows(server: FakeOllamaServer) -> list[int]:
    return [r.json["options"]["num_ctx"] for r in server.chat_requests]


async def test_ten_growing_turns_use_few_windows_that_never_shrink(
    server: FakeOllamaServer,
) -> None:
    resized: list[ollm.NoticeEvent] = []
    async with OllamaProvider(server.url, environ={}) as provider:
        client = _client(provider)
        # From about 1k tokens to about 30k: each turn adds about 3.2k.
        for turn in range(10):
            size = 1 if turn == 0 else 3.2
            async for event in client.chat("word " * int(WORDS_PER_1K * size)):
                if isinstance(event, ollm.NoticeEvent) and event.kind == "context_resized":
                    resized.append(event)
                assert not isinstance(event, ollm.ErrorEvent), event
    windows = _windows(server)
    assert len(windows) == 10
    assert windows == sorted(windows)
    assert len(set(windows)) <= 4
    assert windows[0] == 4096
    assert windows[-1] == 32768
    # Every request fitted the window the server used.
    assert all(e <= w for e, w in zip(server.evaluated, windows, strict=True))
    # Announced: the first load (nothing was loaded), then each growth.
    assert len(resized) == len(set(windows))
    assert "grown from 16384 to 32768 tokens" in resized[-1].message


async def test_a_new_conversation_keeps_the_grown_window(server: FakeOllamaServer) -> None:
    async with OllamaProvider(server.url, environ={}) as provider:
        client = _client(provider)
        await client.run("word " * WORDS_PER_1K * 5)
        client.new_conversation()
        await client.run("hi")
    assert _windows(server) == [8192, 8192]


async def test_never_below_the_window_loaded(server: FakeOllamaServer) -> None:
    async with OllamaProvider(server.url, environ={}) as provider:
        await ollm.ChatClient(
            ollm.Registries(), provider=provider, model="big", context_window=16384
        ).run("load it")
        await _client(provider).run("hi")
    assert _windows(server) == [16384, 16384]


async def test_at_most_the_trained_length_then_token_limit(server: FakeOllamaServer) -> None:
    async with OllamaProvider(server.url, environ={}) as provider:
        client = _client(provider, "short")
        result = await client.run("word " * WORDS_PER_1K * 6)
        assert result.ok
        result = await client.run("word " * WORDS_PER_1K * 6)
    assert _windows(server) == [8192]
    assert result.error is not None
    assert result.error.code == "TOKEN_LIMIT"


def test_context_window_takes_a_number_or_auto() -> None:
    with pytest.raises(ValueError, match='or "auto"'):
        ollm.ChatClient(ollm.Registries(), context_window="big")  # type: ignore[arg-type]


@pytest.mark.parametrize("flavor", ["ollama", "vllm"])
async def test_openai_at_ollamas_v1_says_once_that_the_window_is_not_set(flavor: str) -> None:
    from ollm_openai import OpenAIProvider
    from ollm_testutils import FakeOpenAIServer

    async with (
        FakeOpenAIServer(flavor=flavor) as server,  # type: ignore[arg-type]
        OpenAIProvider(server.base_url, model="gpt-test", environ={}) as provider,
    ):
        client = ollm.ChatClient(ollm.Registries(), provider=provider, context_window=16384)
        first = [e async for e in client.chat("hi")]
        second = [e async for e in client.chat("again")]
        plain = [e async for e in ollm.ChatClient(ollm.Registries(), provider=provider).chat("x")]
    notices = [e for e in first if isinstance(e, ollm.NoticeEvent)]
    assert not any(isinstance(e, ollm.ErrorEvent) for e in first + second + plain)
    assert not any(isinstance(e, ollm.NoticeEvent) for e in second + plain)
    if flavor != "ollama":  # elsewhere, nothing is said about the window
        assert notices == []
        return
    assert [n.kind for n in notices] == ["context_window_ignored"]
    assert "ollm chat -p ollama" in notices[0].message
    assert "16384" in notices[0].message
