"""Servers that compress their replies (public APIs and CDNs do when asked, some proxies
even when not): every path of every provider reads them, over real sockets.

The fake servers compress every body (gzip or deflate) once told to: whole replies
(model lists, a model's details, embeddings, error replies, a chat that is not
streamed) and streamed ones (a chat), piece by piece as a proxy would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import ollm
from ollm_anthropic import AnthropicProvider
from ollm_gemini import GeminiProvider
from ollm_ollama import OllamaProvider
from ollm_openai import OpenAIProvider
from ollm_testutils import (
    AnthropicReply,
    FakeAnthropicServer,
    FakeGeminiServer,
    FakeOllamaServer,
    FakeOpenAIServer,
    GeminiReply,
    OllamaReply,
    OpenAIReply,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["gzip", "deflate"])
def encoding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def chat_text(provider: Any, model: str) -> str:
    request = ollm.ProviderRequest(model=model, messages=(ollm.Message.user("hi"),))
    events = [event async for event in provider.chat_stream(request)]
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert not errors, errors
    return "".join(e.text for e in events if isinstance(e, ollm.TextEvent))


async def error_of_chat(provider: Any, model: str) -> ollm.ErrorEvent:
    request = ollm.ProviderRequest(model=model, messages=(ollm.Message.user("hi"),))
    events = [event async for event in provider.chat_stream(request)]
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    return error


@pytest.fixture
async def ollama(encoding: str) -> AsyncIterator[tuple[FakeOllamaServer, OllamaProvider]]:
    async with FakeOllamaServer() as server:
        server.add_model("all-minilm", ["embedding"])
        server.compress = encoding
        async with OllamaProvider(server.url, environ={}) as provider:
            yield server, provider


@pytest.fixture
async def openai(encoding: str) -> AsyncIterator[tuple[FakeOpenAIServer, OpenAIProvider]]:
    async with FakeOpenAIServer() as server:
        server.compress = encoding
        async with OpenAIProvider(server.base_url, environ={}) as provider:
            yield server, provider


@pytest.fixture
async def gemini(encoding: str) -> AsyncIterator[tuple[FakeGeminiServer, GeminiProvider]]:
    async with FakeGeminiServer() as server:
        server.compress = encoding
        async with GeminiProvider("test-key", base_url=server.url, environ={}) as provider:
            yield server, provider


async def test_ollama_reads_compressed_replies_on_every_path(
    ollama: tuple[FakeOllamaServer, OllamaProvider],
) -> None:
    server, provider = ollama
    server.script(OllamaReply(["Hel", "lo"]))
    assert await chat_text(provider, "llama3.2") == "Hello"
    assert "llama3.2:latest" in [m.name for m in await provider.list_models()]
    assert (await provider.show_model("llama3.2")).details["context_length"] == 131072
    assert len((await provider.embed("all-minilm", ["a", "b"])).vectors) == 2
    error = await error_of_chat(provider, "nope")
    assert error.code == "MODEL_NOT_FOUND"
    assert "'nope' not found" in error.message  # the server's words, decompressed


async def test_openai_reads_compressed_replies_on_every_path(
    openai: tuple[FakeOpenAIServer, OpenAIProvider],
) -> None:
    server, provider = openai
    server.script(OpenAIReply(["Hel", "lo"]), OpenAIReply("whole"))
    assert await chat_text(provider, "gpt-test") == "Hello"
    async with OpenAIProvider(server.base_url, stream=False, environ={}) as whole:
        assert await chat_text(whole, "gpt-test") == "whole"
    assert [m.name for m in await provider.list_models()] == ["gpt-test", "text-embedding-test"]
    assert (await provider.show_model("gpt-test")).name == "gpt-test"
    assert len((await provider.embed("text-embedding-test", ["a", "b"])).vectors) == 2
    server.api_key = "sk-right"
    error = await error_of_chat(provider, "gpt-test")
    assert error.code == "AUTH_FAILED"
    assert "API key" in error.message


async def test_gemini_reads_compressed_replies_on_every_path(
    gemini: tuple[FakeGeminiServer, GeminiProvider],
) -> None:
    server, provider = gemini
    server.script(GeminiReply(["Hel", "lo"]))
    assert await chat_text(provider, "gemini-2.5-flash") == "Hello"
    assert "gemini-2.5-flash" in [m.name for m in await provider.list_models()]
    assert (await provider.show_model("gemini-2.5-pro")).name == "gemini-2.5-pro"
    embedded = await provider.embed("gemini-embedding-001", ["a", "b"])
    assert len(embedded.vectors) == 2
    error = await error_of_chat(provider, "gemini-0")
    assert error.code == "MODEL_NOT_FOUND"
    assert "gemini-2.5-flash" in error.message  # the models it has, from a compressed list


@pytest.fixture
async def anthropic(
    encoding: str,
) -> AsyncIterator[tuple[FakeAnthropicServer, AnthropicProvider]]:
    async with FakeAnthropicServer() as server:
        server.compress = encoding
        async with AnthropicProvider("test-key", base_url=server.url, environ={}) as provider:
            yield server, provider


async def test_anthropic_reads_compressed_replies_on_every_path(
    anthropic: tuple[FakeAnthropicServer, AnthropicProvider],
) -> None:
    server, provider = anthropic
    server.script(AnthropicReply(["Hel", "lo"]))
    assert await chat_text(provider, "claude-sonnet-4-6") == "Hello"
    assert "claude-sonnet-4-6" in [m.name for m in await provider.list_models()]
    assert (await provider.show_model("claude-opus-4-6")).name == "claude-opus-4-6"
    request = ollm.ProviderRequest(model="claude-sonnet-4-6", messages=(ollm.Message.user("hi"),))
    assert await provider.exact_tokens(request) > 0
    error = await error_of_chat(provider, "claude-0")
    assert error.code == "MODEL_NOT_FOUND"
    assert "claude-sonnet-4-6" in error.message  # the models it has, from a compressed list
