"""Connections on a real loopback socket: closing, aborting, pools and event loops."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

import ollm
from ollm_ollama import OllamaProvider

pytestmark = pytest.mark.anyio

RawConnection = Any  # conftest.RawConnection
RawRequest = Any  # conftest.RawRequest
RawServer = Any  # conftest.RawServer (the `raw_server` fixture)

LINE = b'{"model":"llama3.2","message":{"role":"assistant","content":"tok "},"done":false}\n'
DONE = b'{"model":"llama3.2","message":{"role":"assistant","content":""},"done":true}\n'


def _endless(conn: RawConnection, request: RawRequest) -> bool:
    conn.stream_until_closed(LINE)
    return True


def _request(abort: ollm.AbortSignal | None = None) -> ollm.ProviderRequest:
    return ollm.ProviderRequest("llama3.2", (ollm.Message.user("Count forever"),), abort=abort)


def _gone(server: RawServer) -> bool:
    # A bound, not a threshold: the close is usually seen within milliseconds.
    return bool(server.client_closed.wait(10))


async def test_closing_the_stream_early_closes_the_connection(
    raw_server: RawServer, http_stack: str
) -> None:
    raw_server.routes["/api/chat"] = _endless
    async with OllamaProvider(raw_server.url, http=http_stack, environ={}) as provider:
        stream = provider.chat_stream(_request())
        first = await anext(stream)
        assert first == ollm.TextEvent("tok ")
        await stream.aclose()  # type: ignore[attr-defined]
        assert _gone(raw_server)


async def test_breaking_out_of_the_loop_closes_the_connection(
    raw_server: RawServer, http_stack: str
) -> None:
    raw_server.routes["/api/chat"] = _endless
    async with OllamaProvider(raw_server.url, http=http_stack, environ={}) as provider:
        stream = provider.chat_stream(_request())
        async for event in stream:
            assert isinstance(event, ollm.TextEvent)
            break
        await stream.aclose()  # type: ignore[attr-defined]
        assert _gone(raw_server)


async def test_abort_mid_stream_finishes_cancelled_and_closes(
    raw_server: RawServer, http_stack: str
) -> None:
    raw_server.routes["/api/chat"] = _endless
    abort = ollm.AbortSignal()
    events: list[ollm.ProviderEvent] = []
    async with OllamaProvider(raw_server.url, http=http_stack, environ={}) as provider:
        async for event in provider.chat_stream(_request(abort)):
            events.append(event)
            if len(events) == 3:
                abort.abort()
    assert events[-1] == ollm.FinishEvent("cancelled")
    assert all(isinstance(e, ollm.TextEvent) for e in events[:-1])
    assert _gone(raw_server)


async def test_abort_from_another_thread_while_waiting_for_the_model(
    raw_server: RawServer,
    http_stack: str,
) -> None:
    """A cold model sends nothing for a long time: an abort must not wait for it."""
    started = threading.Event()

    def loading(conn: RawConnection, request: RawRequest) -> bool:
        started.set()
        conn.gone(30)
        return True

    raw_server.routes["/api/chat"] = loading
    abort = ollm.AbortSignal()

    def abort_once_asked() -> None:
        if started.wait(10):
            abort.abort()

    threading.Thread(target=abort_once_asked, daemon=True).start()
    async with OllamaProvider(raw_server.url, http=http_stack, environ={}) as provider:
        events = [e async for e in provider.chat_stream(_request(abort))]
    assert events == [ollm.FinishEvent("cancelled")]
    assert _gone(raw_server)


async def test_an_aborted_signal_sends_nothing(raw_server: RawServer, http_stack: str) -> None:
    abort = ollm.AbortSignal()
    abort.abort()
    async with OllamaProvider(raw_server.url, http=http_stack, environ={}) as provider:
        events = [e async for e in provider.chat_stream(_request(abort))]
    assert events == [ollm.FinishEvent("cancelled")]
    assert raw_server.requests == []


async def test_one_pool_reused_across_requests_and_reopened_after_aclose(
    raw_server: RawServer,
    http_stack: str,
) -> None:
    def short(conn: RawConnection, request: RawRequest) -> None:
        conn.start_stream()
        conn.send_chunk(DONE)
        conn.end_stream()

    raw_server.routes["/api/chat"] = short
    provider = OllamaProvider(raw_server.url, http=http_stack, environ={})
    for _ in range(3):
        events = [e async for e in provider.chat_stream(_request())]
        assert isinstance(events[-1], ollm.FinishEvent)
    await provider.aclose()
    events = [e async for e in provider.chat_stream(_request())]
    assert isinstance(events[-1], ollm.FinishEvent)
    await provider.aclose()
    chats = [r for r in raw_server.requests if r.path == "/api/chat"]
    assert len(chats) == 4


def test_one_provider_serves_successive_event_loops(raw_server: RawServer, http_stack: str) -> None:
    """A pool belongs to its loop; a provider reused by a new loop opens a new one."""

    def short(conn: RawConnection, request: RawRequest) -> None:
        conn.start_stream()
        conn.send_chunk(DONE)
        conn.end_stream()

    raw_server.routes["/api/chat"] = short
    provider = OllamaProvider(raw_server.url, http=http_stack, environ={})

    async def once() -> list[ollm.ProviderEvent]:
        return [e async for e in provider.chat_stream(_request())]

    for backend in ("asyncio", "trio", "asyncio"):
        events = anyio.run(once, backend=backend)
        assert isinstance(events[-1], ollm.FinishEvent), events
    anyio.run(provider.aclose)


async def test_abort_from_another_thread_while_a_read_waits(
    raw_server: RawServer, http_stack: str
) -> None:
    """The model stalls mid-reply: the abort ends the pending read at once."""

    def stalls(conn: RawConnection, request: RawRequest) -> bool:
        conn.start_stream()
        conn.send_chunk(LINE)
        conn.gone(30)
        return True

    raw_server.routes["/api/chat"] = stalls
    abort = ollm.AbortSignal()
    events: list[ollm.ProviderEvent] = []
    async with OllamaProvider(raw_server.url, http=http_stack, environ={}) as provider:
        async for event in provider.chat_stream(_request(abort)):
            events.append(event)
            if len(events) == 1:
                threading.Thread(target=abort.abort, daemon=True).start()
    assert events == [ollm.TextEvent("tok "), ollm.FinishEvent("cancelled")]
    assert _gone(raw_server)


async def test_abort_with_a_transport_that_has_no_socket() -> None:
    """An injected transport (tests, benchmarks) is aborted read by read instead."""
    closed = anyio.Event()

    async def body() -> AsyncIterator[bytes]:
        try:
            yield LINE
            await anyio.sleep_forever()
        finally:
            closed.set()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/ps":
            return httpx.Response(200, json={"models": [{"name": "llama3.2:latest"}]})
        return httpx.Response(200, content=body())

    abort = ollm.AbortSignal()
    events: list[ollm.ProviderEvent] = []
    transport = httpx.MockTransport(handler)
    with anyio.fail_after(30):  # a bound, not a threshold: without the abort it hangs
        async with OllamaProvider(transport=transport, environ={}) as provider:
            async for event in provider.chat_stream(_request(abort)):
                events.append(event)
                if len(events) == 1:
                    threading.Thread(target=abort.abort, daemon=True).start()
    assert events == [ollm.TextEvent("tok "), ollm.FinishEvent("cancelled")]
    assert closed.is_set()


async def test_successive_chats_reuse_one_connection(anyio_backend: str, http_stack: str) -> None:
    """A finished reply is read to its end, so its connection serves the next request."""
    from ollm_testutils import FakeOllamaServer, OllamaReply

    async with FakeOllamaServer() as server:
        server.script(*[OllamaReply(["a", "b"]) for _ in range(3)])
        async with OllamaProvider(server.url, http=http_stack, environ={}) as provider:
            client = ollm.ChatClient(ollm.Registries(), provider=provider, model="llama3.2")
            for _ in range(3):
                assert (await client.run("hi", conversation=ollm.Conversation())).text == "ab"
        assert server.connections_accepted == 1
