"""Token counting anchored on the server's counts, and what the runtime learns of a model."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

import ollm
from ollm_ollama import OllamaProvider

pytestmark = pytest.mark.anyio

AddReply = Callable[..., None]  # the `reply` fixture

HOST = "http://127.0.0.1:11434"
Chunk = Callable[..., dict[str, Any]]

HISTORY = (ollm.Message.user("What is the capital of France?"),)


async def _answer(
    provider: OllamaProvider, request: ollm.ProviderRequest
) -> list[ollm.ProviderEvent]:
    return [e async for e in provider.chat_stream(request)]


async def test_without_an_anchor_the_estimate_is_characters_over_four(
    provider: OllamaProvider,
) -> None:
    request = ollm.ProviderRequest("llama3.2", HISTORY, system_prompt="Be brief.")
    expected = math.ceil(len("Be brief." + HISTORY[0].text) / 4)
    assert await provider.count_tokens(request) == expected == ollm.fallback_count(request)


async def test_a_grown_history_is_anchored_on_prompt_eval_count(
    reply: AddReply, provider: OllamaProvider, final: Chunk
) -> None:
    reply(final("Paris.", prompt_eval_count=500))
    first = ollm.ProviderRequest("llama3.2", HISTORY, system_prompt="Be brief.")
    await _answer(provider, first)
    added = (ollm.Message.assistant("Paris."), ollm.Message.user("And of Spain?"))
    grown = ollm.ProviderRequest("llama3.2", HISTORY + added, system_prompt="Be brief.")
    assert await provider.count_tokens(grown) == 500 + math.ceil(len("Paris.And of Spain?") / 4)
    # The very same request counts what the server counted.
    assert await provider.count_tokens(first) == 500


@pytest.mark.parametrize(
    "changed",
    [
        ollm.ProviderRequest("llama3.2", (ollm.Message.user("Another question"),), "Be brief."),
        ollm.ProviderRequest("llama3.2", HISTORY, system_prompt="Be verbose."),
        ollm.ProviderRequest("llama3.2", HISTORY, "Be brief.", tools=(ollm.ToolSchema("f"),)),
        ollm.ProviderRequest("qwen3", HISTORY, system_prompt="Be brief."),
        ollm.ProviderRequest("llama3.2", (), system_prompt="Be brief."),
    ],
)
async def test_a_history_that_did_not_only_grow_falls_back(
    reply: AddReply, provider: OllamaProvider, final: Chunk, changed: ollm.ProviderRequest
) -> None:
    reply(final("Paris.", prompt_eval_count=500))
    await _answer(provider, ollm.ProviderRequest("llama3.2", HISTORY, system_prompt="Be brief."))
    assert await provider.count_tokens(changed) == ollm.fallback_count(changed)


async def test_a_reply_without_counts_sets_no_anchor(
    reply: AddReply, provider: OllamaProvider, final: Chunk
) -> None:
    reply(final("Paris.", prompt_eval_count=None))
    request = ollm.ProviderRequest("llama3.2", HISTORY)
    await _answer(provider, request)
    assert await provider.count_tokens(request) == ollm.fallback_count(request)


# -- capabilities --------------------------------------------------------------------


async def test_capabilities_and_the_loaded_context(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    httpx_mock.add_response(
        method="POST",
        url=f"{HOST}/api/show",
        json={"capabilities": ["completion", "tools", "thinking"], "parameters": "num_ctx 2048"},
    )
    httpx_mock.add_response(
        method="GET",
        url=f"{HOST}/api/ps",
        json={
            "models": [{"name": "qwen3:latest", "model": "qwen3:latest", "context_length": 40960}]
        },
        is_reusable=True,
    )
    capabilities = await provider.model_capabilities("qwen3")
    assert capabilities == ollm.ModelCapabilities(
        tools=True,
        vision=False,
        thinking=True,
        embedding=False,
        completion=True,
        context_window=40960,
        tool_strategy="json-react",  # used only if the model refuses tools after all
    )
    # /api/show is read once per model.
    await provider.model_capabilities("qwen3")
    assert len(httpx_mock.get_requests(url=f"{HOST}/api/show")) == 1


async def test_a_model_not_loaded_uses_its_modelfile_num_ctx(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    httpx_mock.add_response(
        method="POST", url=f"{HOST}/api/show", json={"parameters": "num_ctx 16384"}
    )
    httpx_mock.add_response(method="GET", url=f"{HOST}/api/ps", json={"models": []})
    capabilities = await provider.model_capabilities("llama3.2")
    assert capabilities.context_window == 16384
    # An old server without `capabilities`: unknown, not "none".
    assert capabilities.tools is None
    assert capabilities.vision is None


async def test_no_window_known_is_none(httpx_mock: HTTPXMock, provider: OllamaProvider) -> None:
    httpx_mock.add_response(method="POST", url=f"{HOST}/api/show", json={"capabilities": []})
    httpx_mock.add_response(method="GET", url=f"{HOST}/api/ps", status_code=500)
    capabilities = await provider.model_capabilities("llama3.2")
    assert capabilities.context_window is None
    assert capabilities.tools is False


async def test_capabilities_of_a_missing_model_raise(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    httpx_mock.add_response(
        method="POST",
        url=f"{HOST}/api/show",
        status_code=404,
        json={"error": "model 'llama9:latest' not found"},
    )
    with pytest.raises(ollm.ModelNotFoundError):
        await provider.model_capabilities("llama9")
