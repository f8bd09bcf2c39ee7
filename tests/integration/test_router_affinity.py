"""What a router in front of many servers needs from each provider (Ollama, OpenAI-compatible,
Gemini, Anthropic), against their fake servers on loopback: a stable per-conversation
affinity key in a header the user names (none by default), OpenAI's ``user`` field when asked, and a
prompt whose beginning (system prompt, tools, history) is the same bytes from one request
of a conversation to the next, so that a prefix cache holds it."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

import ollm
from ollm_anthropic import AnthropicProvider
from ollm_gemini import GeminiProvider
from ollm_http import HTTPProvider
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

PROVIDERS = ("ollama", "openai", "gemini", "anthropic")
Server = FakeOllamaServer | FakeOpenAIServer | FakeGeminiServer | FakeAnthropicServer
# The models the chats name, by provider.
MODELS = {"gemini": "gemini-2.5-flash", "anthropic": "claude-sonnet-4-6"}


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.fixture(params=PROVIDERS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(kind: str) -> Iterator[Server]:
    started: Server
    if kind == "ollama":
        started = FakeOllamaServer(models=["llama3.2"])
    elif kind == "openai":
        started = FakeOpenAIServer(models=["llama3.2"])
    elif kind == "anthropic":
        started = FakeAnthropicServer()
    else:
        started = FakeGeminiServer()
    with started:
        yield started


def provider(kind: str, server: Server, **settings: Any) -> HTTPProvider:
    if kind == "ollama":
        assert isinstance(server, FakeOllamaServer)
        return OllamaProvider(server.url, environ=settings.pop("environ", {}), **settings)
    if kind == "openai":
        assert isinstance(server, FakeOpenAIServer)
        return OpenAIProvider(
            server.base_url, model="llama3.2", environ=settings.pop("environ", {}), **settings
        )
    if kind == "anthropic":
        assert isinstance(server, FakeAnthropicServer)
        return AnthropicProvider(
            "test-key", base_url=server.url, environ=settings.pop("environ", {}), **settings
        )
    assert isinstance(server, FakeGeminiServer)
    return GeminiProvider(
        "test-key", base_url=server.url, environ=settings.pop("environ", {}), **settings
    )


def chat_requests(kind: str, server: Server) -> list[Any]:
    if isinstance(server, FakeGeminiServer):
        return server.generate_requests
    if isinstance(server, FakeAnthropicServer):
        return server.message_requests
    return server.chat_requests


def script_tool_rounds(kind: str, server: Server) -> None:
    """Two replies that call a tool (with reasoning), then an answer, then another."""
    if isinstance(server, FakeOllamaServer):
        server.script(
            OllamaReply(thinking="First 1 + 2.", tool_calls=[("add", {"b": 2, "a": 1})]),
            OllamaReply(thinking="Then 3 + 4.", tool_calls=[("add", {"a": 3, "b": 4})]),
            OllamaReply("It is 7."),
            OllamaReply("Bye."),
        )
    elif isinstance(server, FakeOpenAIServer):
        server.script(
            OpenAIReply(reasoning=["First 1 + 2."], tool_calls=[("add", {"b": 2, "a": 1})]),
            OpenAIReply(reasoning=["Then 3 + 4."], tool_calls=[("add", {"a": 3, "b": 4})]),
            OpenAIReply("It is 7."),
            OpenAIReply("Bye."),
        )
    elif isinstance(server, FakeAnthropicServer):
        server.script(
            AnthropicReply(thinking="First 1 + 2.", tool_uses=[("add", {"b": 2, "a": 1})]),
            AnthropicReply(thinking="Then 3 + 4.", tool_uses=[("add", {"a": 3, "b": 4})]),
            AnthropicReply("It is 7."),
            AnthropicReply("Bye."),
        )
    else:
        server.script(
            GeminiReply(thoughts=["First 1 + 2."], calls=[("add", {"b": 2, "a": 1})]),
            GeminiReply(thoughts=["Then 3 + 4."], calls=[("add", {"a": 3, "b": 4})]),
            GeminiReply("It is 7."),
            GeminiReply("Bye."),
        )


async def run_two_chats(kind: str, server: Server, **settings: Any) -> ollm.ChatClient:
    chat_provider = provider(kind, server, **settings)
    async with chat_provider:
        client = ollm.ChatClient(
            ollm.Registries(),
            provider=chat_provider,
            model=MODELS.get(kind, "llama3.2"),
            system="You add numbers.",
            tools=[add],
            tool_strategy="native",
            think=True if kind in MODELS else None,
        )
        first = await client.run("What is 1 + 2 + 4?")
        assert first.text == "It is 7.", first
        second = await client.run("Thanks.")
        assert second.text == "Bye.", second
        return client


# -- the prompt's beginning stays the same bytes ----------------------------------------

_PROMPT_PARTS = {
    "ollama": ("messages", "tools"),
    "openai": ("messages", "tools"),
    "gemini": ("contents", "systemInstruction", "tools"),
    "anthropic": ("messages", "system", "tools"),
}


def raw_value(body: str, key: str) -> str:
    """The JSON text of ``body``'s top-level ``key``, exactly as sent."""
    decoder = json.JSONDecoder()
    top = json.loads(body)
    assert key in top, (key, body)
    start = body.index(f'"{key}"')
    start = body.index(":", start) + 1
    while body[start] in " \t\r\n":
        start += 1
    _, end = decoder.raw_decode(body, start)
    return body[start:end]


async def test_each_request_begins_with_the_bytes_of_the_one_before(
    kind: str, server: Server
) -> None:
    script_tool_rounds(kind, server)
    await run_two_chats(kind, server)
    bodies = [r.body.decode() for r in chat_requests(kind, server)]
    assert len(bodies) == 4
    history, *others = _PROMPT_PARTS[kind]
    for before, after in itertools.pairwise(bodies):
        for key in others:  # the system prompt and the tools: the very same bytes
            assert raw_value(after, key) == raw_value(before, key)
        # The history: what was sent before, then only what is new.
        earlier = raw_value(before, history)
        assert raw_value(after, history).startswith(earlier[:-1] + ","), (earlier, after)


# -- the affinity key ---------------------------------------------------------------------


async def test_no_affinity_header_is_sent_unless_asked(kind: str, server: Server) -> None:
    script_tool_rounds(kind, server)
    await run_two_chats(kind, server)
    for request in chat_requests(kind, server):
        assert "x-session-id" not in {name.lower() for name in request.headers}
        assert "user" not in request.json


async def test_the_conversation_id_goes_in_the_header_the_user_names(
    kind: str, server: Server
) -> None:
    script_tool_rounds(kind, server)
    client = await run_two_chats(kind, server, affinity_header="X-Session-Id")
    sent = [request.headers.get("x-session-id") for request in chat_requests(kind, server)]
    assert sent == [client.conversation.id] * 4  # one key for every turn of the conversation
    assert len(client.conversation.id) == 32


async def test_the_affinity_header_can_come_from_the_environment(kind: str, server: Server) -> None:
    variable = {
        "ollama": "OLLM_OLLAMA",
        "openai": "OLLM_OPENAI",
        "gemini": "OLLM_GEMINI",
        "anthropic": "OLLM_ANTHROPIC",
    }[kind]
    script_tool_rounds(kind, server)
    client = await run_two_chats(
        kind, server, environ={f"{variable}_AFFINITY_HEADER": "x-conversation"}
    )
    sent = {request.headers.get("x-conversation") for request in chat_requests(kind, server)}
    assert sent == {client.conversation.id}


def test_a_header_name_that_no_header_can_have_is_refused_in_words(kind: str) -> None:
    build = {
        "ollama": lambda: OllamaProvider("http://127.0.0.1:9", environ={}, **bad),
        "openai": lambda: OpenAIProvider("http://127.0.0.1:9/v1", environ={}, **bad),
        "gemini": lambda: GeminiProvider("key", environ={}, **bad),
        "anthropic": lambda: AnthropicProvider("key", environ={}, **bad),
    }[kind]
    bad = {"affinity_header": "x session"}
    with pytest.raises(ollm.InvalidRequestError) as raised:
        build()
    assert raised.value.message == (
        "the affinity_header argument is 'x session', which is not the name of an HTTP "
        "header. Use letters, digits and '-', for example x-session-id."
    )


async def test_openai_sends_the_conversation_id_as_its_user_when_asked() -> None:
    with FakeOpenAIServer(models=["m"]) as server:
        async with OpenAIProvider(server.base_url, environ={}, affinity_user=True) as chat_provider:
            client = ollm.ChatClient(ollm.Registries(), provider=chat_provider, model="m")
            await client.run("hi")
            await client.run("again")
        assert [r.json["user"] for r in server.chat_requests] == [client.conversation.id] * 2
