"""A redirect never takes a key or a conversation to another server, whatever the provider.

Gemini's key travels in ``x-goog-api-key`` and an Azure-style profile's in ``api-key``:
httpx strips only ``Authorization`` across origins. A chat (a POST carrying the
conversation) redirected to another server is refused in words; a model list (a GET)
follows, with no header that carries a credential. Over real sockets on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from raw_http import raw_server

import ollm
from ollm_anthropic import AnthropicProvider
from ollm_gemini import GeminiProvider
from ollm_http import HTTPProvider
from ollm_ollama import OllamaProvider
from ollm_openai import OpenAIProvider

pytestmark = pytest.mark.anyio

KEY = "sk-the-key-0123456789"


def moved(port: int) -> Callable[[bytes], bytes]:
    """A 307 to the same path on another port."""

    def answer(request: bytes) -> bytes:
        path = request.split(b" ", 2)[1]
        where = b"http://127.0.0.1:%d%s" % (port, path)
        return b"HTTP/1.1 307 Moved\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % where

    return answer


def listing(request: bytes) -> bytes:
    body = json.dumps({"data": [], "models": []}).encode()
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def build(name: str, url: str) -> HTTPProvider:
    headers = {"api-key": KEY, "X-Tenant": KEY}
    if name == "gemini":
        return GeminiProvider(KEY, base_url=url, headers=headers, environ={})
    if name == "anthropic":
        return AnthropicProvider(KEY, base_url=url, headers=headers, environ={})
    if name == "openai":
        return OpenAIProvider(url + "/v1", model="m", headers=headers, environ={})
    return OllamaProvider(url, headers=headers, environ={"OLLAMA_API_KEY": KEY})


@pytest.mark.parametrize("name", ["gemini", "openai", "ollama", "anthropic"])
async def test_a_chat_redirected_to_another_server_is_refused_and_sends_it_nothing(
    name: str,
) -> None:
    request = ollm.ProviderRequest(model="m", messages=(ollm.Message.user("secret plan"),))
    async with (
        raw_server([listing] * 8) as other,
        raw_server([moved(other.port)] * 8) as first,
        build(name, first.url) as provider,
    ):
        events = [e async for e in provider.chat_stream(request)]  # type: ignore[attr-defined]
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "BAD_RESPONSE"
    assert "another server" in error.message
    assert f"127.0.0.1:{other.port}" in error.message
    assert not [r for r in other.requests if r.startswith(b"POST")]  # no conversation went
    assert all(KEY.encode() not in r for r in other.requests)


@pytest.mark.parametrize("name", ["gemini", "openai", "ollama", "anthropic"])
async def test_a_model_list_follows_a_redirect_without_any_credential(name: str) -> None:
    async with (
        raw_server([listing] * 4) as other,
        raw_server([moved(other.port)] * 4) as first,
        build(name, first.url) as provider,
    ):
        await provider.list_models()  # type: ignore[attr-defined]
    assert other.requests, "the redirect was not followed"
    sent: Any = b"\n".join(other.requests).lower()
    assert KEY.lower().encode() not in sent
    for header in (b"x-goog-api-key", b"x-api-key", b"api-key", b"authorization", b"x-tenant"):
        assert header + b":" not in sent
    assert KEY.encode() in first.requests[0]  # the first server was asked with the key
