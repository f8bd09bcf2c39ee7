"""Fixtures of the OpenAI-compatible provider's tests.

- ``server``: a ``FakeOpenAIServer`` (OpenAI flavor) on 127.0.0.1;
- ``provider``: an ``OpenAIProvider`` for it, with an empty environment, on ollm's own
  transport and on httpx's stack (``http_stack``);
- ``run``: one chat through a ``ChatClient``, its events as a list;
- ``stream``: one request straight through ``chat_stream``, its events as a list.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

import ollm
from ollm_openai import OpenAIProvider
from ollm_testutils import FakeOpenAIServer

MODEL = "gpt-test"

Run = Callable[..., Awaitable[list[ollm.ChatEvent]]]
Stream = Callable[..., Awaitable[list[ollm.ProviderEvent]]]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


@pytest.fixture(params=["builtin", "httpx"])
def http_stack(request: pytest.FixtureRequest) -> str:
    """Real-server tests run on ollm's own HTTP/1.1 transport and on httpx's stack."""
    return str(request.param)


@pytest.fixture
async def provider(server: FakeOpenAIServer, http_stack: str) -> AsyncIterator[OpenAIProvider]:
    async with OpenAIProvider(server.base_url, model=MODEL, http=http_stack, environ={}) as built:
        yield built


def client_for(provider: OpenAIProvider, **settings: Any) -> ollm.ChatClient:
    """A chat client on ``provider`` alone (no plugins)."""
    return ollm.ChatClient(ollm.Registries(), provider=provider, **settings)


async def chat_events(client: ollm.ChatClient, prompt: str, **kwargs: Any) -> list[ollm.ChatEvent]:
    """Every event of one chat."""
    async with client.chat(prompt, **kwargs) as events:
        return [event async for event in events]


@pytest.fixture
def run(provider: OpenAIProvider) -> Run:
    async def go(prompt: str = "hi", **settings: Any) -> list[ollm.ChatEvent]:
        return await chat_events(client_for(provider, **settings), prompt)

    return go


async def provider_events(
    provider: OpenAIProvider, request: ollm.ProviderRequest
) -> list[ollm.ProviderEvent]:
    """Every event of ``chat_stream(request)``."""
    return [event async for event in provider.chat_stream(request)]


def request_for(prompt: str = "hi", **fields: Any) -> ollm.ProviderRequest:
    """A provider request for ``MODEL`` with one user message."""
    fields.setdefault("model", MODEL)
    return ollm.ProviderRequest(messages=(ollm.Message.user(prompt),), **fields)


@pytest.fixture
def stream(provider: OpenAIProvider) -> Stream:
    async def go(prompt: str = "hi", **fields: Any) -> list[ollm.ProviderEvent]:
        return await provider_events(provider, request_for(prompt, **fields))

    return go


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, ollm.TextEvent))


def error_of(events: list[Any]) -> ollm.ErrorEvent:
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert errors, f"no error event in {events}"
    return errors[0]
