"""Fixtures of the Anthropic provider's tests.

- ``server``: a ``FakeAnthropicServer`` on 127.0.0.1 (its key is ``test-key``);
- ``provider``: an ``AnthropicProvider`` for it, with an empty environment, on ollm's own
  transport and on httpx's stack (``http_stack``);
- ``stream``: one request straight through ``chat_stream``, its events as a list.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

import ollm
from ollm_anthropic import AnthropicProvider
from ollm_http import NO_RETRY
from ollm_testutils import FakeAnthropicServer

MODEL = "claude-sonnet-4-6"
KEY = "test-key"

Stream = Callable[..., Awaitable[list[ollm.ProviderEvent]]]


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(api_key=KEY) as running:
        yield running


@pytest.fixture(params=["builtin", "httpx"])
def http_stack(request: pytest.FixtureRequest) -> str:
    """Real-server tests run on ollm's own HTTP/1.1 transport and on httpx's stack."""
    return str(request.param)


def provider_for(server: FakeAnthropicServer, **settings: Any) -> AnthropicProvider:
    """A provider for ``server`` with an empty environment (no retry unless asked)."""
    settings.setdefault("retry", NO_RETRY)
    settings.setdefault("model", MODEL)
    return AnthropicProvider(
        settings.pop("api_key", KEY), base_url=server.url, environ={}, **settings
    )


@pytest.fixture
async def provider(
    server: FakeAnthropicServer, http_stack: str
) -> AsyncIterator[AnthropicProvider]:
    async with provider_for(server, http=http_stack) as built:
        yield built


def client_for(provider: AnthropicProvider, **settings: Any) -> ollm.ChatClient:
    """A chat client on ``provider`` alone (no plugins)."""
    settings.setdefault("model", MODEL)
    return ollm.ChatClient(ollm.Registries(), provider=provider, **settings)


async def chat_events(client: ollm.ChatClient, prompt: str, **kwargs: Any) -> list[ollm.ChatEvent]:
    """Every event of one chat."""
    async with client.chat(prompt, **kwargs) as events:
        return [event async for event in events]


def request_for(prompt: str = "hi", **fields: Any) -> ollm.ProviderRequest:
    """A provider request for ``MODEL`` with one user message."""
    fields.setdefault("model", MODEL)
    return ollm.ProviderRequest(messages=(ollm.Message.user(prompt),), **fields)


async def provider_events(
    provider: AnthropicProvider, request: ollm.ProviderRequest
) -> list[ollm.ProviderEvent]:
    """Every event of ``chat_stream(request)``."""
    return [event async for event in provider.chat_stream(request)]


@pytest.fixture
def stream(provider: AnthropicProvider) -> Stream:
    async def go(prompt: str = "hi", **fields: Any) -> list[ollm.ProviderEvent]:
        return await provider_events(provider, request_for(prompt, **fields))

    return go


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, ollm.TextEvent))


def error_of(events: list[Any]) -> ollm.ErrorEvent:
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert errors, f"no error event in {events}"
    return errors[0]


def finish_of(events: list[Any]) -> ollm.FinishEvent:
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent), events
    return finish
