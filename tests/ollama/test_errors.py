"""Failures become one error event with a stable code and a message that says what to do."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import ollm
from ollm_ollama import OllamaProvider

pytestmark = pytest.mark.anyio

AddReply = Callable[..., None]  # the `reply` fixture
RawConnection = Any  # conftest.RawConnection
RawRequest = Any  # conftest.RawRequest
RawServer = Any  # conftest.RawServer (the `raw_server` fixture)
RunChat = Callable[..., Awaitable[list[ollm.ProviderEvent]]]  # the `chat` fixture

HOST = "http://127.0.0.1:11434"
# llama.cpp's refusal inside Ollama's, as a server sends it with "truncate": false.
LLAMA_SERVER_TOO_LONG = json.dumps(
    {
        "error": json.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "request (9000 tokens) exceeds the available context size "
                    "(4096 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 9000,
                    "n_ctx": 4096,
                }
            }
        )
    }
).encode()


def _only_error(events: list[ollm.ProviderEvent]) -> ollm.ErrorEvent:
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert len(errors) == 1, events
    assert events[-1] is errors[0], events
    assert not any(isinstance(e, ollm.FinishEvent) for e in events), events
    return errors[0]


async def _chat_at(url: str, http: str = "httpx", **kwargs: object) -> list[ollm.ProviderEvent]:
    async with OllamaProvider(url, http=http, environ={}, **kwargs) as provider:  # type: ignore[arg-type]
        request = ollm.ProviderRequest("llama3.2", (ollm.Message.user("hi"),))
        return [e async for e in provider.chat_stream(request)]


async def test_connection_refused_says_how_to_start_ollama(
    closed_port: str, http_stack: str
) -> None:
    error = _only_error(await _chat_at(closed_port, http_stack))
    assert error.code == "CONNECTION_FAILED"
    assert error.message == (
        f"Ollama is not running at {closed_port}. Start it with: ollama serve (install it from "
        "https://ollama.com/download first). No Ollama here? ollm chat -p echo answers with no "
        "server at all, and -p openai reaches any OpenAI-compatible server."
    )


async def test_a_name_that_does_not_resolve_points_at_ollama_host(
    httpx_mock: HTTPXMock,
) -> None:
    httpx_mock.add_exception(
        httpx.ConnectError("[Errno -2] Name or service not known"), is_reusable=True
    )
    error = _only_error(await _chat_at("http://ollama.invalid:11434"))
    assert error.code == "CONNECTION_FAILED"
    assert "OLLAMA_HOST" in error.message
    assert "ollama.invalid" in error.message


async def test_a_connect_timeout(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_exception(httpx.ConnectTimeout("timed out"), is_reusable=True)
    error = _only_error(await _chat_at(HOST, connect_timeout=2))
    assert error.code == "TIMEOUT"
    assert "2 s" in error.message
    assert "OLLM_OLLAMA_CONNECT_TIMEOUT" in error.message


async def test_a_read_timeout_on_a_real_socket(raw_server: RawServer, http_stack: str) -> None:
    def silent(conn: RawConnection, request: RawRequest) -> bool:
        conn.gone(30)  # never answers; returns when the client gives up
        return True

    raw_server.routes["/api/chat"] = silent
    error = _only_error(await _chat_at(raw_server.url, http_stack, timeout=0.2))
    assert error.code == "TIMEOUT"
    assert "0.2 s" in error.message
    assert "OLLM_OLLAMA_TIMEOUT" in error.message


async def test_a_read_timeout_in_the_middle_of_a_stream(
    raw_server: RawServer, http_stack: str
) -> None:
    def stalls(conn: RawConnection, request: RawRequest) -> bool:
        conn.start_stream()
        conn.send_chunk(b'{"message":{"content":"Hel"},"done":false}\n')
        conn.gone(30)
        return True

    raw_server.routes["/api/chat"] = stalls
    events = await _chat_at(raw_server.url, http_stack, timeout=0.2)
    assert events[0] == ollm.TextEvent("Hel")
    assert _only_error(events).code == "TIMEOUT"


async def test_a_connection_broken_mid_stream_is_an_interrupted_stream(
    raw_server: RawServer, http_stack: str
) -> None:
    def breaks(conn: RawConnection, request: RawRequest) -> bool:
        conn.start_stream()
        conn.send_chunk(b'{"message":{"content":"Hel"},"done":false}\n')
        conn.send(b"ff\r\npartial")  # a chunk cut short, then the socket closes
        return True

    raw_server.routes["/api/chat"] = breaks
    events = await _chat_at(raw_server.url, http_stack)
    assert events[0] == ollm.TextEvent("Hel")
    error = _only_error(events)
    assert error.code == "STREAM_INTERRUPTED"
    assert "Try again" in error.message


async def test_a_server_that_hangs_up_without_answering(
    raw_server: RawServer, http_stack: str
) -> None:
    raw_server.routes["/api/chat"] = lambda conn, request: True
    error = _only_error(await _chat_at(raw_server.url, http_stack))
    assert error.code == "CONNECTION_FAILED"
    assert "closed the connection without answering" in error.message


@pytest.mark.parametrize(
    ("status", "body", "code", "needed"),
    [
        (404, b'{"error":"model \'llama9\' not found"}', "MODEL_NOT_FOUND", "pull llama9"),
        (
            400,
            b'{"error":"registry.ollama.ai/library/gemma2:latest does not support tools"}',
            "TOOLS_UNSUPPORTED",
            "registry.ollama.ai/library/gemma2:latest does not support tools",
        ),
        (400, b'{"error":"\\"bert\\" does not support chat"}', "INVALID_REQUEST", "embed()"),
        (400, b'{"error":"invalid model name"}', "INVALID_REQUEST", "invalid model name"),
        (
            400,
            LLAMA_SERVER_TOO_LONG,
            "CONTEXT_EXCEEDED",
            "(9000 tokens, for a window of 4096)",
        ),
        (
            400,
            b'{"error":"the input length exceeds the context length"}',
            "CONTEXT_EXCEEDED",
            "too long for 'llama9'",
        ),
        (500, b'{"error":"option \\"stop\\" must be of type array"}', "PROVIDER_ERROR", "array"),
        (500, b'{"error":"llama runner process has terminated"}', "PROVIDER_ERROR", "log"),
        (
            503,
            b'{"error":"server busy, please try again.  maximum pending requests exceeded"}',
            "PROVIDER_ERROR",
            "OLLAMA_MAX_QUEUE",
        ),
        (499, b'{"error":"request canceled"}', "PROVIDER_ERROR", "request canceled"),
        (
            401,
            b'{"error":"unauthorized","signin_url":"https://ollama.com/connect"}',
            "AUTH_FAILED",
            "OLLAMA_API_KEY",
        ),
        (403, b'{"error":"forbidden"}', "AUTH_FAILED", "OLLAMA_API_KEY"),
        (404, b"404 page not found", "PROVIDER_ERROR", "/api/chat does not exist"),
        (405, b"405 method not allowed", "PROVIDER_ERROR", "Ollama server"),
        (502, b"<html>Bad Gateway</html>", "PROVIDER_ERROR", "proxy"),
        (504, b"", "TIMEOUT", "proxy"),
        (418, b'{"error":"teapot"}', "PROVIDER_ERROR", "teapot"),
        # A dump of several lines (a proxy's traceback): its meaningful line, one line.
        (
            400,
            b'{"error":"Traceback (most recent call last):\\n  File \\"/srv/p.py\\", line 3,'
            b' in f\\n    g()\\nValueError: bad option"}',
            "INVALID_REQUEST",
            "ValueError: bad option",
        ),
    ],
)
async def test_http_errors_keep_the_servers_words(
    reply: AddReply,
    chat: RunChat,
    httpx_mock: HTTPXMock,
    status: int,
    body: bytes,
    code: str,
    needed: str,
) -> None:
    # A transient failure is tried twice more before it is the answer (one policy for
    # every provider: tests/http/test_provider_kit.py); a refusal is the answer at once.
    attempts = 3 if status in (500, 502, 503, 504) else 1
    for _ in range(attempts):
        reply(body=body, status=status)
    error = _only_error(await chat(model="llama9"))
    assert error.code == code
    assert needed in error.message
    assert "\n" not in error.message
    assert len(httpx_mock.get_requests(url=f"{HOST}/api/chat")) == attempts


async def test_tools_unsupported_is_the_error_the_runtime_acts_on(
    reply: AddReply, chat: RunChat
) -> None:
    reply(
        body=b'{"error":"registry.ollama.ai/library/gemma2:latest does not support tools"}',
        status=400,
    )
    error = _only_error(await chat(model="gemma3", tools=(ollm.ToolSchema("f"),)))
    assert error.code == ollm.ErrorCode.TOOLS_UNSUPPORTED
    assert isinstance(ollm.error_from_code(error.code, error.message), ollm.ToolsUnsupportedError)


async def test_a_capability_error_in_the_stream_keeps_its_code(
    reply: AddReply, chat: RunChat
) -> None:
    reply({"error": "registry.ollama.ai/library/gemma2:latest does not support tools"})
    assert _only_error(await chat()).code == "TOOLS_UNSUPPORTED"


async def test_an_error_object_from_a_proxy_is_read(reply: AddReply, chat: RunChat) -> None:
    reply({"error": {"message": "upstream failed", "type": "server_error"}})
    error = _only_error(await chat())
    assert "upstream failed" in error.message


async def test_errors_carry_no_traceback_text(reply: AddReply, chat: RunChat) -> None:
    for _ in range(3):  # a 500 is tried again
        reply(body=json.dumps({"error": "x" * 2000}).encode(), status=500)
    error = _only_error(await chat())
    assert "Traceback" not in error.message
    assert len(error.message) < 800
