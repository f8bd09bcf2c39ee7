"""No provider ever shows a secret: not in an error, a repr, an event or a log line.

A random secret goes everywhere a user may put one (the base URL's ``user:secret@``, the
API key, a header of their own), then every provider fails every way it can, over real
sockets on 127.0.0.1: nothing listening, silence, not HTTP, a 401, a 404, a 500, a
redirect to another server, a reply cut short, a frame that is not the wire format. The
ollm-http part of this promise is tests/http/test_secrets.py; the command line's (stderr,
``--json``, the log database) is tests/cli/test_secrets_in_the_cli.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from leaks import assert_not_shown, error_texts, logged, secrets
from raw_http import CLOSE, HANG, raw_server

import ollm
from ollm_anthropic import AnthropicProvider
from ollm_gemini import GeminiProvider
from ollm_http import NO_RETRY, HTTPProvider
from ollm_ollama import OllamaProvider
from ollm_openai import OpenAIProvider

MODEL = "m1"
LOGGERS = (
    "ollm_http",
    "ollm_ollama",
    "ollm_openai",
    "ollm_gemini",
    "ollm_anthropic",
    "httpx",
    "ollm",
)
PROVIDERS = ("ollama", "openai", "gemini", "anthropic")


def with_userinfo(url: str, secret: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://alice:{secret}@{rest}"


def build(name: str, url: str, secret: str) -> HTTPProvider:
    """The provider ``name`` at ``url``, with ``secret`` in every place that takes one."""
    common: dict[str, Any] = {"timeout": 0.2, "retry": NO_RETRY}
    address = with_userinfo(url, secret)
    if name == "ollama":
        return OllamaProvider(
            address,
            headers={"X-Tenant-Token": secret},
            environ={"OLLAMA_API_KEY": secret},
            **common,
        )
    if name == "openai":
        return OpenAIProvider(
            address + "/v1", api_key=secret, headers={"api-key": secret}, environ={}, **common
        )
    if name == "anthropic":
        return AnthropicProvider(
            secret, base_url=address, headers={"X-Tenant": secret}, environ={}, **common
        )
    return GeminiProvider(
        secret, base_url=address, headers={"X-Tenant": secret}, environ={}, **common
    )


def chat_path(name: str) -> bytes:
    return {
        "ollama": b"/api/chat",
        "openai": b"/v1/chat/completions",
        "gemini": b":streamGenerateContent",
        "anthropic": b"/v1/messages",
    }[name].lstrip(b"/")


def status(code: int, body: dict[str, Any], extra: bytes = b"") -> bytes:
    data = json.dumps(body).encode()
    return b"HTTP/1.1 %d X\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        code,
        extra,
        len(data),
        data,
    )


OTHER = status(404, {"error": "not here"})


def on_chat(name: str, answer: bytes | str | tuple[bytes, str]) -> Callable[[bytes], Any]:
    """Answers ``answer`` to the chat request, 404 to anything else (a provider's checks)."""

    def respond(request: bytes) -> Any:
        return answer if chat_path(name) in request.split(b"\r\n", 1)[0] else OTHER

    return respond


Scenario = Callable[[str, str, list[str]], Awaitable[None]]


class Said(str):
    """A message as the user reads it (beside the reprs and tracebacks in ``shown``)."""


async def attempt(provider: HTTPProvider, shown: list[str]) -> None:
    """A chat and a model list that fail; what they show goes to ``shown``."""
    shown += [repr(provider), repr(getattr(provider, "config", None))]
    request = ollm.ProviderRequest(model=MODEL, messages=(ollm.Message.user("hi"),))
    async with provider:
        events = [event async for event in provider.chat_stream(request)]  # type: ignore[attr-defined]
        shown += [repr(event) for event in events]
        errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
        assert errors, events
        shown += [Said(e.message) for e in errors]
        try:
            await provider.list_models()  # type: ignore[attr-defined]
        except ollm.OllmError as exc:
            shown += [*error_texts(exc), Said(exc.message)]


async def scripted(name: str, secret: str, shown: list[str], answer: Any) -> None:
    async with raw_server([on_chat(name, answer)] * 12) as server:
        await attempt(build(name, server.url, secret), shown)


async def refused(name: str, secret: str, shown: list[str]) -> None:
    await attempt(build(name, "http://127.0.0.1:1", secret), shown)


async def silence(name: str, secret: str, shown: list[str]) -> None:
    await scripted(name, secret, shown, HANG)


async def not_http(name: str, secret: str, shown: list[str]) -> None:
    await scripted(name, secret, shown, (b"SPEAK FRIEND\r\n\r\n", CLOSE))


async def unauthorized(name: str, secret: str, shown: list[str]) -> None:
    await scripted(name, secret, shown, status(401, {"error": {"message": "bad key"}}))


async def missing_model(name: str, secret: str, shown: list[str]) -> None:
    await scripted(name, secret, shown, status(404, {"error": "model 'm1' not found"}))


async def failing(name: str, secret: str, shown: list[str]) -> None:
    await scripted(name, secret, shown, status(500, {"error": "boom"}))


async def redirected(name: str, secret: str, shown: list[str]) -> None:
    async with raw_server([status(200, {})] * 4) as other:
        where = f"http://bob:{secret}@127.0.0.1:{other.port}/x".encode()
        moved = b"HTTP/1.1 307 Moved\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % where
        await scripted(name, secret, shown, moved)


async def cut_short(name: str, secret: str, shown: list[str]) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
    await scripted(name, secret, shown, (head + b"data: {}\n\n", CLOSE))


async def not_the_wire_format(name: str, secret: str, shown: list[str]) -> None:
    body = b"<html>a proxy's page</html>\n\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
    await scripted(name, secret, shown, head + body)


SCENARIOS: list[Callable[[str, str, list[str]], Awaitable[None]]] = [
    refused,
    silence,
    not_http,
    unauthorized,
    missing_model,
    failing,
    redirected,
    cut_short,
    not_the_wire_format,
]


@settings(max_examples=60)
@given(
    secrets(),
    st.sampled_from(PROVIDERS),
    st.sampled_from(SCENARIOS),
    st.sampled_from(["asyncio", "trio"]),
)
def test_a_secret_never_shows_whatever_fails(
    secret: str, name: str, scenario: Scenario, backend: str
) -> None:
    shown: list[str] = []
    with logged(*LOGGERS) as lines:
        anyio.run(scenario, name, secret, shown, backend=backend)
    assert len(shown) > 2
    assert_not_shown(secret, [*shown, *lines])


def test_every_scenario_runs_for_every_provider() -> None:
    # The property samples; this runs each pair once, so none is left out.
    for name in PROVIDERS:
        for scenario in SCENARIOS:
            shown: list[str] = []
            with logged(*LOGGERS) as lines:
                anyio.run(scenario, name, "s3cr3t-0123456789abcdef", shown)
            assert_not_shown("s3cr3t-0123456789abcdef", [*shown, *lines])


_DOUBLE_STOP = re.compile(r"(?<!\.)\.\.(?!\.)|[!?]\.")
_CAPITAL_INSIDE = re.compile(r"\b(?:to|at|of|from|for|with|by) The\b")


@pytest.mark.parametrize("name", PROVIDERS)
def test_every_failure_reads_as_a_person_would_write_it(name: str) -> None:
    # A server's words end with their own "!" or "."; ollm's sentences go on after them.
    said: list[str] = []
    for scenario in [*SCENARIOS, sorry]:
        shown: list[str] = []
        anyio.run(scenario, name, "s3cr3t-0123456789abcdef", shown)
        said += [text for text in shown if isinstance(text, Said)]
    assert len(said) >= len(SCENARIOS)
    for message in said:
        assert message[0].isupper() or message[0] in "'\"", message
        assert not _DOUBLE_STOP.search(message), message
        assert not _CAPITAL_INSIDE.search(message), message


async def sorry(name: str, secret: str, shown: list[str]) -> None:
    """A server that fails in the middle of a reply, in words that end with "!"."""
    error = {"error": {"message": "Sorry about that!", "code": 500}}
    if name == "ollama":
        body = json.dumps({"error": "Sorry about that!"}).encode() + b"\n"
    elif name == "anthropic":
        event = {"type": "error", "error": {"type": "api_error", "message": "Sorry about that!"}}
        body = b"event: error\ndata: " + json.dumps(event).encode() + b"\n\n"
    else:
        body = b"data: " + json.dumps(error).encode() + b"\n\n"
    await scripted(
        name,
        secret,
        shown,
        status(200, {}).replace(b"2\r\n\r\n{}", b"%d\r\n\r\n%s" % (len(body), body)),
    )
