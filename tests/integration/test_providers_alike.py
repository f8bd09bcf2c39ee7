"""The HTTP providers behave alike where the skeleton (ollm_http.HTTPProvider) decides.

Ollama, OpenAI-compatible servers, Gemini and Anthropic's Messages API differ in their
wire; rate limits, transient failures, settings, ids and the embed() input check are one
behaviour, tested here once for all of them through the public API, each provider on an
injected ``httpx`` transport that answers in its own wire format (``httpx.MockTransport``,
which reads bodies before ollm does: an error reply's words must still arrive).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

import ollm
from ollm_anthropic import AnthropicProvider
from ollm_gemini import GeminiProvider
from ollm_http import NO_RETRY, HTTPProvider, RetryPolicy
from ollm_ollama import OllamaProvider
from ollm_openai import OpenAIProvider

pytestmark = pytest.mark.anyio

PROVIDERS = ("ollama", "openai", "gemini", "anthropic")
MODEL = "m1"
# A policy that tries three times and does not wait (the waits are tests/http's).
QUICK = RetryPolicy(attempts=3, backoff=0)

Handler = Callable[[httpx.Request], httpx.Response]


def chat_path(name: str) -> str:
    """The route a provider's chat request goes to."""
    return {
        "ollama": "/api/chat",
        "openai": "/v1/chat/completions",
        "gemini": f"/v1beta/models/{MODEL}:streamGenerateContent",
        "anthropic": "/v1/messages",
    }[name]


def build(name: str, handler: Handler, **settings: Any) -> HTTPProvider:
    """The provider ``name`` with every request answered by ``handler``."""
    transport = httpx.MockTransport(handler)
    if name == "ollama":
        return OllamaProvider("http://127.0.0.1:9", transport=transport, environ={}, **settings)
    if name == "openai":
        return OpenAIProvider(
            "http://127.0.0.1:9/v1", model=MODEL, transport=transport, environ={}, **settings
        )
    if name == "anthropic":
        return AnthropicProvider(
            "key", base_url="http://127.0.0.1:9", transport=transport, environ={}, **settings
        )
    return GeminiProvider(
        "key", base_url="http://127.0.0.1:9", transport=transport, environ={}, **settings
    )


def messages_sse(*blocks: tuple[dict[str, Any], list[dict[str, Any]]], stop: str) -> str:
    """A Messages API stream: each block's start and deltas, then the stop reason."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}}
    ]
    for index, (start, deltas) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {}})
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def reply_text(name: str, text: str) -> httpx.Response:
    """A successful streamed reply of ``text``, in the provider's wire format."""
    if name == "ollama":
        lines = [
            {"message": {"role": "assistant", "content": text}, "done": False},
            {"message": {"role": "assistant", "content": ""}, "done": True, "eval_count": 1},
        ]
        body = "".join(json.dumps(line) + "\n" for line in lines)
        return httpx.Response(200, text=body, headers={"Content-Type": "application/x-ndjson"})
    if name == "openai":
        events = [
            {"choices": [{"index": 0, "delta": {"content": text}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, text=body, headers={"Content-Type": "text/event-stream"})
    if name == "anthropic":
        delta = {"type": "text_delta", "text": text}
        body = messages_sse(({"type": "text", "text": ""}, [delta]), stop="end_turn")
        return httpx.Response(200, text=body, headers={"Content-Type": "text/event-stream"})
    event = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ]
    }
    return httpx.Response(
        200, text=f"data: {json.dumps(event)}\n\n", headers={"Content-Type": "text/event-stream"}
    )


def reply_call(name: str) -> httpx.Response:
    """A reply with one tool call whose server gave it no id."""
    if name == "ollama":
        call = {"function": {"name": "f", "arguments": {"n": 1}}}
        lines = [
            {"message": {"role": "assistant", "content": "", "tool_calls": [call]}, "done": False},
            {"message": {"role": "assistant", "content": ""}, "done": True},
        ]
        return httpx.Response(200, text="".join(json.dumps(line) + "\n" for line in lines))
    if name == "openai":
        delta = {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": '{"n": 1}'}}]}
        events = [
            {"choices": [{"index": 0, "delta": delta}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, text=body)
    if name == "anthropic":
        start = {"type": "tool_use", "name": "f", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": '{"n": 1}'}
        return httpx.Response(200, text=messages_sse((start, [delta]), stop="tool_use"))
    part = {"functionCall": {"name": "f", "args": {"n": 1}}}
    event = {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]
    }
    return httpx.Response(200, text=f"data: {json.dumps(event)}\n\n")


def refusal(name: str, status: int, message: str, **headers: str) -> httpx.Response:
    """An error reply of ``status`` in the provider's error shape."""
    if name == "gemini":
        body: Any = {"error": {"code": status, "message": message, "status": "UNAVAILABLE"}}
    elif name == "openai":
        body = {"error": {"message": message, "type": "server_error"}}
    elif name == "anthropic":
        body = {"type": "error", "error": {"type": "api_error", "message": message}}
    else:
        body = {"error": message}
    return httpx.Response(status, json=body, headers=headers)


class Server:
    """Answers chat requests from a script (then with ``then``), anything else with 404."""

    def __init__(self, name: str, *replies: httpx.Response, then: httpx.Response | None = None):
        self.name = name
        self.script: Iterator[httpx.Response] = iter(replies)
        self.then = then
        self.chats: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != chat_path(self.name):
            return httpx.Response(404, json={"error": "not here"})
        self.chats.append(request)
        reply = next(self.script, None) or self.then
        assert reply is not None, "the script ran out"
        return reply


async def events_of(provider: HTTPProvider, **fields: Any) -> list[ollm.ProviderEvent]:
    request = ollm.ProviderRequest(model=MODEL, messages=(ollm.Message.user("hi"),), **fields)
    async with provider:
        return [event async for event in provider.chat_stream(request)]  # type: ignore[attr-defined]


def outcome(events: list[ollm.ProviderEvent]) -> tuple[str, str]:
    """(``"text"``, the text) or (the error's code, its message)."""
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    if errors:
        return errors[0].code, errors[0].message
    return "text", "".join(e.text for e in events if isinstance(e, ollm.TextEvent))


@pytest.fixture(params=PROVIDERS)
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- rate limits and transient failures: one policy --------------------------------------


async def test_a_429_is_waited_out_and_the_reply_comes(name: str) -> None:
    server = Server(name, refusal(name, 429, "slow down", **{"Retry-After": "0"}))
    server.then = reply_text(name, "finally")
    assert outcome(await events_of(build(name, server, retry=QUICK))) == ("text", "finally")
    assert len(server.chats) == 2


@pytest.mark.parametrize(
    ("status", "headers", "code"),
    [
        (429, {"Retry-After": "0"}, "RATE_LIMITED"),
        (429, {}, "RATE_LIMITED"),
        (503, {"Retry-After": "0"}, "RATE_LIMITED"),
        (503, {}, "PROVIDER_ERROR"),
        (500, {}, "PROVIDER_ERROR"),
        (502, {}, "PROVIDER_ERROR"),
    ],
)
async def test_limits_and_transient_failures_are_tried_three_times(
    name: str, status: int, headers: dict[str, str], code: str
) -> None:
    server = Server(name, then=refusal(name, status, "not now", **headers))
    found, message = outcome(await events_of(build(name, server, retry=QUICK)))
    assert (found, len(server.chats)) == (code, 3)
    assert "not now" in message  # the server's own words


async def test_a_wait_longer_than_the_policy_allows_gives_up_at_once(name: str) -> None:
    server = Server(name, then=refusal(name, 429, "come back tomorrow", **{"Retry-After": "86400"}))
    found, _ = outcome(await events_of(build(name, server)))
    assert (found, len(server.chats)) == ("RATE_LIMITED", 1)


async def test_the_wait_a_server_asks_for_reaches_the_error_event(name: str) -> None:
    # With its retries off (a pool owns them), the provider says how long to wait.
    server = Server(name, then=refusal(name, 429, "slow down", **{"Retry-After": "7"}))
    events = await events_of(build(name, server, retry=NO_RETRY))
    (error,) = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert (error.code, error.retry_after, len(server.chats)) == ("RATE_LIMITED", 7.0, 1)


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_a_refusal_is_never_tried_again(name: str, status: int) -> None:
    server = Server(name, then=refusal(name, status, "no"))
    found, _ = outcome(await events_of(build(name, server, retry=QUICK)))
    assert found != "text"
    assert len(server.chats) == 1


async def test_an_error_reply_through_mock_transport_keeps_its_meaning(name: str) -> None:
    # MockTransport hands over a body already read: the words and the code still arrive.
    server = Server(name, then=refusal(name, 401, "Incorrect API key provided"))
    found, message = outcome(await events_of(build(name, server)))
    assert found == "AUTH_FAILED"
    assert "Incorrect API key provided" in message


# -- one id format -----------------------------------------------------------------------


async def test_calls_without_an_id_get_ollms_one_id_format_unique_across_replies(
    name: str,
) -> None:
    server = Server(name, reply_call(name), reply_call(name))
    ids = []
    for _ in range(2):
        events = await events_of(build(name, server))
        ids += [e.call.id for e in events if isinstance(e, ollm.ToolCallEvent)]
    assert len(ids) == 2
    assert len(set(ids)) == 2
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in ids), ids


# -- settings refused in the same words --------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("timeout", "abc", "the timeout argument is 'abc'; it must be a number of seconds"),
        ("timeout", True, "the timeout argument is True; it must be a number of seconds"),
        ("timeout", -1, "the timeout argument is -1.0; it must be a positive number"),
        ("connect_timeout", "x", "the connect_timeout argument is 'x'; it must be a number"),
        ("http", "curl", "the http argument is 'curl'; use 'builtin'"),
    ],
)
def test_bad_settings_are_refused_in_the_same_words(
    name: str, setting: str, value: object, words: str
) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        build(name, Server(name), **{setting: value})
    assert words in caught.value.message


@pytest.mark.parametrize("stack", ["HTTPX", "httpx", " Builtin "])
def test_the_http_stack_is_read_in_any_case(name: str, stack: str) -> None:
    build(name, Server(name), http=stack)


async def test_embed_of_one_string_is_refused_in_the_same_words(name: str) -> None:
    provider = build(name, Server(name))
    if not hasattr(provider, "embed"):
        pytest.skip(f"{name} has no embeddings")
    with pytest.raises(ollm.InvalidRequestError) as caught:
        await provider.embed(MODEL, "one string")  # type: ignore[attr-defined]
    assert "takes a list of texts, not one string" in caught.value.message


# -- built from a table of settings (a pool member's), through the registry -------------


def test_each_provider_is_built_from_a_table_of_settings_by_its_plugin(name: str) -> None:
    registries = ollm.discover(plugins=[_plugin(name)], entry_points=[])
    url = {"ollama": "host", "openai": "base_url", "gemini": "base_url", "anthropic": "base_url"}[
        name
    ]
    built = registries.providers.build(name, {url: "http://10.0.0.7:8000", "timeout": 42})
    assert isinstance(built, HTTPProvider)
    assert built.url.startswith("http://10.0.0.7:8000")
    assert built.http.config.timeouts.read == 42


def test_a_setting_a_provider_does_not_have_is_refused_naming_those_it_has(name: str) -> None:
    registries = ollm.discover(plugins=[_plugin(name)], entry_points=[])
    with pytest.raises(ollm.InvalidRequestError) as caught:
        registries.providers.build(name, {"hots": "x", "transport": "y"})
    message = caught.value.message
    assert message.startswith(f"The {name} provider has no setting 'hots', 'transport'. ")
    assert "timeout, connect_timeout" in message
    assert "environ" not in message
    assert "retry" not in message.replace("retry_", "")


def _plugin(name: str) -> Any:
    import importlib

    return importlib.import_module(f"ollm_{name}.plugin")
