"""Every failure of an OpenAI-compatible server is a typed error with a next step."""

from __future__ import annotations

import socket

import httpx
import pytest
from pytest_httpx import HTTPXMock

import ollm
from ollm_http import RetryPolicy
from ollm_openai import OpenAIProvider
from ollm_testutils import FakeOpenAIServer, OpenAIReply
from ollm_testutils.fake_openai import FLAVORS

from .conftest import MODEL, Stream, error_of, provider_events, request_for, text_of

pytestmark = pytest.mark.anyio


async def _events(server: FakeOpenAIServer, **settings: object) -> list[ollm.ProviderEvent]:
    settings.setdefault("model", MODEL)
    async with OpenAIProvider(server.base_url, environ={}, **settings) as provider:  # type: ignore[arg-type]
        return await provider_events(provider, request_for(model=str(settings["model"])))


async def test_a_missing_key_names_the_variable(server: FakeOpenAIServer) -> None:
    server.api_key = "sk-right"
    error = error_of(await _events(server))
    assert error.code == "AUTH_FAILED"
    assert "No API key was sent: set OPENAI_API_KEY" in error.message
    error = error_of(await _events(server, api_key="sk-wrong"))
    assert error.code == "AUTH_FAILED"
    assert "Check the key in the api_key argument" in error.message
    assert "Incorrect API key" in error.message
    events = await _events(server, api_key="sk-right")
    assert text_of(events) == "Hello! How can I help?"
    assert server.requests[-1].headers["authorization"] == "Bearer sk-right"


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_missing_model_lists_what_the_server_has(flavor: str) -> None:
    async with FakeOpenAIServer(flavor=flavor, models=["qwen3-8b", "llama-3.1-8b"]) as server:  # type: ignore[arg-type]
        error = error_of(await _events(server, model="nope"))
    assert error.code == "MODEL_NOT_FOUND"
    assert "'nope'" in error.message
    assert "It has: qwen3-8b, llama-3.1-8b." in error.message


async def test_a_base_url_without_v1(server: FakeOpenAIServer) -> None:
    async with OpenAIProvider(server.url, model=MODEL, environ={}) as provider:
        error = error_of(await provider_events(provider, request_for()))
    assert error.code == "INVALID_REQUEST"
    assert "has no route /chat/completions" in error.message
    assert "ends with /v1" in error.message


async def test_rate_limits_are_waited_out(server: FakeOpenAIServer) -> None:
    server.script(
        OpenAIReply.failure(429, "Rate limit reached", type="requests", retry_after=0.01),
        OpenAIReply.failure(429, "Rate limit reached", type="requests", retry_after=0.01),
        OpenAIReply(["finally"]),
    )
    assert text_of(await _events(server)) == "finally"
    assert len(server.chat_requests) == 3


async def test_rate_limits_that_last_end_with_rate_limited(server: FakeOpenAIServer) -> None:
    limited = OpenAIReply.failure(429, "Slow down", retry_after=0.01)
    server.script(limited, limited)
    events = await _events(server, retry=RetryPolicy(attempts=2, backoff=0.01))
    error = error_of(events)
    assert error.code == "RATE_LIMITED"
    assert "Slow down" in error.message
    assert len(server.chat_requests) == 2
    # A wait longer than the policy allows is not waited.
    server.script(OpenAIReply.failure(429, "Come back tomorrow", retry_after=86400))
    events = await _events(server)
    assert error_of(events).code == "RATE_LIMITED"
    assert len(server.chat_requests) == 3


async def test_an_exhausted_quota_is_not_retried(server: FakeOpenAIServer) -> None:
    server.script(
        OpenAIReply.failure(429, "You exceeded your current quota", code="insufficient_quota")
    )
    error = error_of(await _events(server))
    assert error.code == "PROVIDER_ERROR"
    assert "quota" in error.message
    assert "billing" in error.message
    assert len(server.chat_requests) == 1


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_conversation_too_long_is_context_exceeded_with_its_sizes(flavor: str) -> None:
    async with FakeOpenAIServer(flavor=flavor) as server:  # type: ignore[arg-type]
        server.context_window = 2
        error = error_of(await _events(server))
    assert error.code == "CONTEXT_EXCEEDED", error.message
    assert "for a window of 2)" in error.message
    assert "start a new one" in error.message


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_server_without_tool_parsing_is_tools_unsupported(flavor: str) -> None:
    async with FakeOpenAIServer(flavor=flavor) as server:  # type: ignore[arg-type]
        server.tools_supported = False
        async with OpenAIProvider(server.base_url, environ={}) as provider:
            request = request_for(model=MODEL, tools=(ollm.ToolSchema("f"),))
            error = error_of(await provider_events(provider, request))
    assert error.code == "TOOLS_UNSUPPORTED", error.message
    assert "ReAct" in error.message


async def test_the_runtime_switches_to_react_when_vllm_has_no_tool_parser() -> None:
    async with FakeOpenAIServer(flavor="vllm") as server:
        server.tools_supported = False
        server.script(
            OpenAIReply(
                'Thought: compute it.\nAction: calculate\nAction Input: {"expression": "6*7"}'
            ),
            OpenAIReply("Thought: done.\nFinal Answer: 42"),
        )
        registries = ollm.discover()
        async with OpenAIProvider(server.base_url, model=MODEL, environ={}) as provider:
            client = ollm.ChatClient(registries, provider=provider, tools=["calculate"])
            result = await client.run("6*7?")
    assert result.ok, result.error
    assert result.text == "42"
    bodies = [r.json for r in server.chat_requests]
    assert "tools" in bodies[0]
    assert all("tools" not in b for b in bodies[1:])
    assert "Observation: 42" in bodies[-1]["messages"][-1]["content"]


@pytest.mark.parametrize(
    ("status", "hint"), [(500, "see its log"), (502, "a proxy or gateway"), (503, "see its log")]
)
async def test_server_failures(server: FakeOpenAIServer, status: int, hint: str) -> None:
    # A transient failure is tried again (the same policy as for Ollama and Gemini).
    server.script(*[OpenAIReply.failure(status, "Internal failure")] * 2)
    error = error_of(await _events(server, retry=RetryPolicy(attempts=2, backoff=0)))
    assert error.code == "PROVIDER_ERROR"
    assert f"HTTP {status}" in error.message
    assert hint in error.message
    assert len(server.chat_requests) == 2


async def test_older_vllm_error_bodies(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=400,
        json={
            "object": "error",
            "message": '"auto" tool choice requires --enable-auto-tool-choice',
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    )
    async with OpenAIProvider("http://vllm.test:8000/v1", http="httpx", environ={}) as provider:
        request = request_for(tools=(ollm.ToolSchema("f"),))
        error = error_of(await provider_events(provider, request))
    assert error.code == "TOOLS_UNSUPPORTED"


async def test_a_page_that_is_not_json(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(status_code=404, text="<html>Not here</html>")
    async with OpenAIProvider("http://proxy.test/v1", http="httpx", environ={}) as provider:
        error = error_of(await provider_events(provider, request_for()))
    assert error.code == "INVALID_REQUEST"
    assert "<html>Not here</html>" in error.message


async def test_nothing_listening() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    async with OpenAIProvider(f"http://127.0.0.1:{port}/v1", model=MODEL, environ={}) as provider:
        error = error_of(await provider_events(provider, request_for()))
    assert error.code == "CONNECTION_FAILED"
    assert "OPENAI_BASE_URL" in error.message
    assert "vllm serve" in error.message


async def test_a_bad_event_is_bad_response(server: FakeOpenAIServer, stream: Stream) -> None:
    server.script(
        OpenAIReply(
            raw=[b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n', b"data: <html>\n\n"]
        )
    )
    events = await stream()
    assert text_of(events) == "a"
    error = error_of(events)
    assert error.code == "BAD_RESPONSE"
    assert "<html>" in error.message


async def test_deep_json_is_bad_response_not_a_crash(
    server: FakeOpenAIServer, stream: Stream
) -> None:
    deep = b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"
    server.script(OpenAIReply(raw=[deep]))
    error = error_of(await stream())
    assert error.code == "BAD_RESPONSE"


async def test_deep_tool_arguments_go_back_to_the_model(server: FakeOpenAIServer) -> None:
    arguments = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
    server.script(
        OpenAIReply(tool_calls=[("calculate", arguments)]),  # type: ignore[list-item]
        OpenAIReply(["gave up"]),
    )
    registries = ollm.discover()
    async with OpenAIProvider(server.base_url, model=MODEL, environ={}) as provider:
        client = ollm.ChatClient(registries, provider=provider, tools=["calculate"])
        result = await client.run("go")
    assert result.ok
    assert result.text == "gave up"
    tool = server.chat_requests[1].json["messages"][-1]
    assert tool["role"] == "tool"
    assert "nested too deeply" in tool["content"]


async def test_an_unsendable_option_is_invalid_request(stream: Stream) -> None:
    events = await stream(options=ollm.GenerationOptions(temperature=float("nan")))
    assert error_of(events).code == "INVALID_REQUEST"
    events = await stream(tool_choice="missing", tools=(ollm.ToolSchema("f"),))
    assert "tool_choice 'missing'" in error_of(events).message


async def test_a_timeout_names_the_setting(server: FakeOpenAIServer) -> None:
    server.script(OpenAIReply(["x"], delay=5))
    async with OpenAIProvider(server.base_url, model=MODEL, timeout=0.2, environ={}) as provider:
        error = error_of(await provider_events(provider, request_for()))
    assert error.code == "TIMEOUT"
    assert "OLLM_OPENAI_TIMEOUT" in error.message


def test_httpx_is_the_transport_under_test() -> None:
    # The pytest-httpx tests above patch httpx's transports; ollm's own is not used there.
    assert httpx.AsyncHTTPTransport is not None
