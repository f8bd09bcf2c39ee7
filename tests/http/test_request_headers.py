"""The headers a middleware puts on a ``ProviderRequest`` go with the HTTP request, for
every provider on ollm-http; a provider's own stream headers stay its own."""

from __future__ import annotations

from typing import Any

import msgspec
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

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Stamp:
    """Puts a ``traceparent`` (and a header that would break the stream) on each request."""

    async def on_request(
        self, ctx: ollm.MiddlewareContext, request: ollm.ProviderRequest
    ) -> ollm.ProviderRequest:
        headers = {**request.headers, "traceparent": TRACEPARENT, "Accept": "text/html"}
        return msgspec.structs.replace(request, headers=headers)


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["ollama", "openai", "gemini", "anthropic"])
async def test_a_middlewares_headers_reach_the_server(name: str) -> None:
    server: Any
    if name == "ollama":
        server, reply, model = FakeOllamaServer(), OllamaReply("hi"), "llama3.2"
    elif name == "openai":
        server, reply, model = FakeOpenAIServer(), OpenAIReply("hi"), "gpt-test"
    elif name == "anthropic":
        server, reply, model = FakeAnthropicServer(), AnthropicReply("hi"), "claude-sonnet-4-6"
    else:
        server, reply, model = FakeGeminiServer(), GeminiReply("hi"), "gemini-2.5-flash"
    with server:
        server.script(reply)
        provider: ollm.ProviderAdapter
        if name == "ollama":
            provider = OllamaProvider(server.url, environ={})
        elif name == "openai":
            provider = OpenAIProvider(server.base_url, model=model, environ={})
        elif name == "anthropic":
            provider = AnthropicProvider("test-key", base_url=server.url, environ={})
        else:
            provider = GeminiProvider("test-key", base_url=server.url, environ={})
        client = ollm.ChatClient(
            ollm.Registries(), provider=provider, model=model, middleware=[Stamp()]
        )
        async with client:
            result = await client.run("Hello")
        assert result.ok, result
        if name == "anthropic":
            [sent] = server.message_requests
        else:
            [sent] = server.generate_requests if name == "gemini" else server.chat_requests
        assert sent.headers.get("traceparent") == TRACEPARENT
        assert sent.headers.get("accept") != "text/html"  # the stream's own Accept
