"""The helpers a provider's chat stream is built from, each on its own.

``body_reader`` (the transport's bytes, decoded when compressed, or a body already read),
``abort_shuts_socket`` (an abort ends a pending read; its remover undoes that), ``drain``
(the body's end read so the connection is reused; bounded; shielded), ``close_response``
(shielded, never raises), ``failure_event`` (the event that ends a failed stream) and
``check_health``. The stream helpers talk to a real socket on 127.0.0.1 (``raw_server``),
on asyncio and trio.
"""

from __future__ import annotations

import gzip
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Literal

import anyio
import anyio.abc
import anyio.lowlevel
import httpx
import pytest
from raw_http import CLOSE, Handler, ok, raw_server

import ollm
from ollm.types import AbortSignal, ErrorEvent, FinishEvent, HealthStatus
from ollm_http import (
    ErrorContext,
    HTTPClient,
    HTTPConfig,
    abort_shuts_socket,
    body_reader,
    check_health,
    close_response,
    drain,
    failure_event,
)

pytestmark = pytest.mark.anyio

CONTEXT = ErrorContext(provider="Test", code_name="test", url_setting="TEST_HOST")
HANG_GUARD = 20  # seconds: a hang detector only, never a measure of speed

Stack = Literal["builtin", "httpx"]


def client(url: str) -> HTTPClient:
    return HTTPClient(HTTPConfig(url, context=CONTEXT))


def head(length: int) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def read_all(reads: Callable[[], Awaitable[bytes]]) -> bytes:
    blocks: list[bytes] = []
    while True:
        try:
            blocks.append(await reads())
        except StopAsyncIteration:
            return b"".join(blocks)


def counted(
    reads: Callable[[], Awaitable[bytes]], ended: list[bool]
) -> Callable[[], Awaitable[bytes]]:
    """``reads``, noting in ``ended`` when it reached the body's end."""

    async def read() -> bytes:
        try:
            return await reads()
        except StopAsyncIteration:
            ended.append(True)
            raise

    return read


def waits_for_close(first: bytes, closed: anyio.Event) -> Handler:
    """An answer that sends ``first``, notes when the client closes its socket, and keeps
    its own side open (so only the client's shut socket can end the client's read)."""

    async def answer(request: bytes, stream: anyio.abc.ByteStream) -> None:
        await stream.send(first)
        try:
            while await stream.receive():
                pass
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            closed.set()
        await anyio.sleep_forever()

    return answer


def ends_on(go: anyio.Event, first: bytes, rest: bytes) -> Handler:
    """An answer that sends ``first``, and ``rest`` once the test sets ``go``."""

    async def answer(request: bytes, stream: anyio.abc.ByteStream) -> None:
        await stream.send(first)
        await go.wait()
        await stream.send(rest)

    return answer


# body_reader


async def test_body_reader_reads_the_transports_own_stream_to_its_end() -> None:
    async with raw_server([ok(b'{"a": 1}\n{"b": 2}\n'), ok(b"next")]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        reads = body_reader(reply.response)
        assert await read_all(reads) == b'{"a": 1}\n{"b": 2}\n'
        with pytest.raises(StopAsyncIteration):
            await reads()
        # httpx's layer was not used: the reply is still open, its stream not consumed,
        # and the connection stays the reply's until it is closed.
        assert reply.response.is_closed is False
        assert reply.response.is_stream_consumed is False
        await close_response(reply.response)
        assert (await http.request("GET", "/next")).content == b"next"
        assert server.connections == 1
        await http.aclose()


async def test_body_reader_decodes_a_compressed_body() -> None:
    packed = gzip.compress(b"hello, compressed world")
    answer = ok(packed, extra=b"Content-Encoding: GZip\r\n")
    async with raw_server([answer]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        assert await read_all(body_reader(reply.response)) == b"hello, compressed world"
        await close_response(reply.response)
        await http.aclose()


async def test_body_reader_of_an_identity_encoding_in_capitals_is_the_fast_path() -> None:
    answer = ok(b"as it came", extra=b"Content-Encoding: IDENTITY\r\n")
    async with raw_server([answer]) as server:
        http = client(server.url)
        reply = await http.open("GET", "/")
        assert await read_all(body_reader(reply.response)) == b"as it came"
        assert reply.response.is_stream_consumed is False  # not httpx's layer
        await close_response(reply.response)
        await http.aclose()


async def test_body_reader_of_a_body_already_read_gives_it_from_memory() -> None:
    async with raw_server([ok(b"in memory")]) as server:
        http = client(server.url)
        reply = await http.open("GET", "/")
        await reply.response.aread()
        reads = body_reader(reply.response)
        assert await read_all(reads) == b"in memory"
        await http.aclose()
    built = httpx.Response(200, content=b"built in memory")
    assert await read_all(body_reader(built)) == b"built in memory"


# abort_shuts_socket


async def test_an_abort_shuts_the_socket_so_a_pending_read_ends_and_the_server_sees_it() -> None:
    closed = anyio.Event()
    async with raw_server([waits_for_close(head(100) + b"first", closed)]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        reads = body_reader(reply.response)
        abort = AbortSignal()
        unwatch = abort_shuts_socket(reply.response, abort)
        assert unwatch is not None
        with anyio.fail_after(HANG_GUARD):
            assert await reads() == b"first"
            abort.abort()
            # The rest never comes: without the shut socket, this read would wait.
            with pytest.raises(httpx.RemoteProtocolError):
                await reads()
            await closed.wait()  # the server saw the close
        unwatch()
        await close_response(reply.response)
        await http.aclose()


async def test_an_abort_already_fired_shuts_the_socket_at_once() -> None:
    closed = anyio.Event()
    async with raw_server([waits_for_close(head(100) + b"first", closed)]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        abort = AbortSignal()
        abort.abort()
        unwatch = abort_shuts_socket(reply.response, abort)
        assert unwatch is not None
        with anyio.fail_after(HANG_GUARD):
            await closed.wait()
        await close_response(reply.response)
        await http.aclose()


async def test_the_remover_stops_an_abort_from_shutting_the_socket() -> None:
    go = anyio.Event()
    async with raw_server([ends_on(go, head(11) + b"first", b"second")]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        reads = body_reader(reply.response)
        abort = AbortSignal()
        unwatch = abort_shuts_socket(reply.response, abort)
        assert unwatch is not None
        with anyio.fail_after(HANG_GUARD):
            assert await reads() == b"first"
            unwatch()
            abort.abort()
            go.set()
            assert await read_all(reads) == b"second"
        await close_response(reply.response)
        await http.aclose()


async def test_an_abort_after_the_reply_was_closed_does_not_raise() -> None:
    closed = anyio.Event()
    async with raw_server([waits_for_close(head(100) + b"first", closed)]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        abort = AbortSignal()
        unwatch = abort_shuts_socket(reply.response, abort)
        assert unwatch is not None
        await close_response(reply.response)  # the socket is closed: shutting it fails
        abort.abort()
        with anyio.fail_after(HANG_GUARD):
            await closed.wait()
        await http.aclose()


class _NoSocket:
    def get_extra_info(self, info: str) -> object:
        return None


class _FailingInfo:
    def get_extra_info(self, info: str) -> object:
        raise RuntimeError("no socket here")


@pytest.mark.parametrize(
    "extensions",
    [
        {},
        {"network_stream": object()},
        {"network_stream": _NoSocket()},
        {"network_stream": _FailingInfo()},
    ],
    ids=["no-stream", "no-get-extra-info", "socket-is-none", "get-extra-info-fails"],
)
async def test_without_a_socket_to_shut_the_caller_is_told_to_guard_its_reads(
    extensions: dict[str, object],
) -> None:
    response = httpx.Response(200, content=b"x", extensions=extensions)
    abort = AbortSignal()
    assert abort_shuts_socket(response, abort) is None
    abort.abort()  # no callback was left behind to fail


async def test_an_injected_transport_has_no_socket_to_shut() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=b"hi"))
    http = HTTPClient(HTTPConfig("http://test.invalid"), transport=transport)
    reply = await http.open("GET", "/")
    assert abort_shuts_socket(reply.response, AbortSignal()) is None
    await close_response(reply.response)
    await http.aclose()


# drain


async def test_drain_reads_the_bodys_end_so_the_connection_is_reused() -> None:
    go = anyio.Event()
    last = ends_on(go, CHUNKED_HEAD + chunk(b'{"done":true}'), LAST_CHUNK)
    async with raw_server([last, ok(b"next")]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        reads = body_reader(reply.response)
        with anyio.fail_after(HANG_GUARD):
            assert await reads() == b'{"done":true}'
        go.set()  # the body's end comes only now: drain must wait for it
        ended: list[bool] = []
        await drain(counted(reads, ended))
        assert ended == [True]
        await close_response(reply.response)
        assert (await http.request("GET", "/next")).content == b"next"
        assert server.connections == 1
        await http.aclose()


async def test_without_drain_the_unfinished_connection_is_not_reused() -> None:
    # The control for the test above: the same reply closed without drain.
    go = anyio.Event()
    last = ends_on(go, CHUNKED_HEAD + chunk(b'{"done":true}'), LAST_CHUNK)
    async with raw_server([last, ok(b"next")]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        with anyio.fail_after(HANG_GUARD):
            assert await body_reader(reply.response)() == b'{"done":true}'
        await close_response(reply.response)
        go.set()
        assert (await http.request("GET", "/next")).content == b"next"
        assert server.connections == 2
        await http.aclose()


async def test_drain_is_bounded_when_the_end_never_comes() -> None:
    gave_up: list[bool] = []
    never = anyio.Event()

    async def answer(request: bytes, stream: anyio.abc.ByteStream) -> None:
        await stream.send(CHUNKED_HEAD + chunk(b"first"))
        with anyio.move_on_after(HANG_GUARD):
            await never.wait()
        gave_up.append(True)
        await stream.send(LAST_CHUNK)

    async with raw_server([answer]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        reads = body_reader(reply.response)
        with anyio.fail_after(HANG_GUARD):
            assert await reads() == b"first"
        ended: list[bool] = []
        await drain(counted(reads, ended), seconds=0.2)
        assert ended == []
        assert gave_up == []  # drain returned while the server still held the body
        await close_response(reply.response)
        await http.aclose()


async def test_drain_runs_to_the_end_while_its_task_is_being_cancelled() -> None:
    go = anyio.Event()
    last = ends_on(go, CHUNKED_HEAD + chunk(b"first"), LAST_CHUNK)
    async with raw_server([last, ok(b"next")]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        reads = body_reader(reply.response)
        with anyio.fail_after(HANG_GUARD):
            assert await reads() == b"first"
        go.set()
        ended: list[bool] = []
        with anyio.CancelScope() as scope:
            scope.cancel()
            await drain(counted(reads, ended))
        assert ended == [True]
        await close_response(reply.response)
        assert (await http.request("GET", "/next")).content == b"next"
        assert server.connections == 1
        await http.aclose()


async def test_drain_swallows_a_broken_end_and_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    async with raw_server([(head(100) + b"first", CLOSE)]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        reads = body_reader(reply.response)
        assert await reads() == b"first"
        with caplog.at_level(logging.DEBUG, logger="ollm_http"):
            await drain(reads)
        records = [r for r in caplog.records if r.name == "ollm_http"]
        assert [r.getMessage() for r in records] == [
            "the end of a finished reply could not be read"
        ]
        assert records[0].levelno == logging.DEBUG
        assert records[0].exc_info is not None
        assert isinstance(records[0].exc_info[1], httpx.RemoteProtocolError)
        await close_response(reply.response)
        await http.aclose()


# close_response


@pytest.mark.parametrize("stack", ["builtin", "httpx"])
async def test_close_response_closes_a_half_read_reply_and_the_server_sees_it(
    stack: Stack,
) -> None:
    closed = anyio.Event()
    async with raw_server([waits_for_close(head(100) + b"first", closed)]) as server:
        http = HTTPClient(HTTPConfig(server.url, context=CONTEXT), stack=stack)
        reply = await http.open("POST", "/chat", json={})
        await close_response(reply.response)
        assert reply.response.is_closed is True
        with anyio.fail_after(HANG_GUARD):
            await closed.wait()
        await http.aclose()


@pytest.mark.parametrize("stack", ["builtin", "httpx"])
async def test_close_response_closes_even_while_its_task_is_being_cancelled(
    stack: Stack,
) -> None:
    closed = anyio.Event()
    async with raw_server([waits_for_close(head(100) + b"first", closed)]) as server:
        http = HTTPClient(HTTPConfig(server.url, context=CONTEXT), stack=stack)
        reply = await http.open("POST", "/chat", json={})
        with anyio.CancelScope() as scope:
            scope.cancel()
            await close_response(reply.response)
        assert reply.response.is_closed is True
        with anyio.fail_after(HANG_GUARD):
            await closed.wait()
        await http.aclose()


class _ClosesAfterACheckpoint(httpx.AsyncByteStream):
    """A body whose close awaits (as another transport's might) before it is done."""

    def __init__(self) -> None:
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"x"

    async def aclose(self) -> None:
        await anyio.lowlevel.checkpoint()
        self.closed = True


async def test_close_response_finishes_a_close_that_awaits_while_cancelled() -> None:
    # ollm's transport and httpx's shield their own socket's close; another transport
    # may not, and close_response must not leave its close half done.
    stream = _ClosesAfterACheckpoint()
    response = httpx.Response(200, stream=stream)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await close_response(response)
    assert stream.closed is True
    assert response.is_closed is True


class _BrokenClose(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"x"

    async def aclose(self) -> None:
        raise RuntimeError("the socket was already gone")


async def test_close_response_never_raises_and_logs_the_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    response = httpx.Response(200, stream=_BrokenClose())
    with caplog.at_level(logging.DEBUG, logger="ollm_http"):
        await close_response(response)
    records = [r for r in caplog.records if r.name == "ollm_http"]
    assert [r.getMessage() for r in records] == ["closing a response failed"]
    assert records[0].levelno == logging.DEBUG
    assert records[0].exc_info is not None
    assert str(records[0].exc_info[1]) == "the socket was already gone"


# failure_event


def _never(exc: BaseException) -> ollm.OllmError:
    raise AssertionError(f"connection_error was called with {exc!r}")


def _event(
    exc: Exception, abort: AbortSignal, logger: logging.Logger | None = None
) -> ollm.types.ProviderEvent:
    try:
        raise exc
    except Exception as caught:
        return failure_event(
            caught,
            abort,
            connection_error=_never,
            reading="Reading the reply from Test at http://h",
            report="the model's name",
            logger=logger or logging.getLogger("tests.failure_event"),
        )


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("boom"),
        ollm.BadResponseError("bad"),
        httpx.ReadError("reset"),
    ],
)
async def test_a_failure_after_an_abort_is_a_cancellation(exc: Exception) -> None:
    abort = AbortSignal()
    abort.abort()
    assert _event(exc, abort) == FinishEvent("cancelled")


async def test_an_ollm_error_becomes_its_own_event() -> None:
    error = ollm.StreamInterruptedError("The connection broke.", provider="test")
    assert _event(error, AbortSignal()) == ErrorEvent(
        "The connection broke.", ollm.ErrorCode.STREAM_INTERRUPTED
    )


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ReadTimeout("timed out"),
        httpx.RemoteProtocolError("peer closed connection"),
        httpx.DecodingError("a gzip body that is not gzip"),  # not a transport error
    ],
    ids=["read-timeout", "protocol", "decoding"],
)
async def test_an_httpx_failure_is_mapped_by_the_providers_connection_error(
    failure: httpx.HTTPError,
) -> None:
    seen: list[BaseException] = []

    def connection_error(exc: BaseException) -> ollm.OllmError:
        seen.append(exc)
        return ollm.RequestTimeoutError("Test sent nothing for 5 s.")

    try:
        raise failure
    except Exception as exc:
        event = failure_event(
            exc,
            AbortSignal(),
            connection_error=connection_error,
            reading="Reading",
            report="it",
            logger=logging.getLogger("tests.failure_event"),
        )
    assert event == ErrorEvent("Test sent nothing for 5 s.", ollm.ErrorCode.TIMEOUT)
    assert seen == [failure]


async def test_anything_else_is_a_provider_error_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("tests.failure_event")
    with caplog.at_level(logging.DEBUG, logger="tests.failure_event"):
        event = _event(KeyError("content"), AbortSignal(), logger)
    assert event == ErrorEvent(
        "Reading the reply from Test at http://h failed: KeyError: 'content'. "
        "Please report this with the model's name.",
        ollm.ErrorCode.PROVIDER_ERROR,
    )
    records = [r for r in caplog.records if r.name == "tests.failure_event"]
    assert [r.getMessage() for r in records] == [
        "Reading the reply from Test at http://h failed unexpectedly"
    ]
    assert records[0].levelno == logging.ERROR
    assert records[0].exc_info is not None
    assert isinstance(records[0].exc_info[1], KeyError)


async def test_a_known_failure_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="tests.failure_event"):
        _event(ollm.BadResponseError("bad"), AbortSignal())
        aborted = AbortSignal()
        aborted.abort()
        _event(ValueError("boom"), aborted)
    assert [r for r in caplog.records if r.name == "tests.failure_event"] == []


# check_health


async def test_a_healthy_server_gives_its_version_and_latency() -> None:
    before = datetime.now(UTC)
    async with raw_server([ok(b'{"version": "0.5.1"}')]) as server:
        http = client(server.url)

        inner: list[float] = []

        async def probe() -> str | None:
            started = time.perf_counter()
            reply = await http.request("GET", "/api/version")
            version: str = reply.json()["version"]
            inner.append((time.perf_counter() - started) * 1000.0)
            return version

        started = time.perf_counter()
        status = await check_health("test", probe, f"Test at {server.url}")
        outer = (time.perf_counter() - started) * 1000.0
        await http.aclose()
    after = datetime.now(UTC)
    assert status.ok is True
    assert status.provider == "test"
    assert status.version == "0.5.1"
    assert status.error is None
    assert status.error_code is None
    # In milliseconds, and the probe's own time: no more than the call, no less than
    # the probe measured itself (a consistency check, not a measure of speed).
    assert status.latency_ms is not None
    assert inner[0] <= status.latency_ms <= outer
    assert before <= status.checked_at <= after
    assert status.checked_at.tzinfo is UTC


@pytest.mark.parametrize("version", [None, ""])
async def test_a_server_without_a_version_is_healthy_with_none(version: str | None) -> None:
    async def probe() -> str | None:
        return version

    status = await check_health("test", probe, "Test at http://h")
    assert status.ok is True
    assert status.version is None
    assert status.error is None


async def test_a_server_that_is_not_running_is_an_unhealthy_status() -> None:
    async with raw_server([]) as server:
        port = server.port
    http = client(f"http://127.0.0.1:{port}")

    async def probe() -> str | None:
        await http.request("GET", "/api/version")
        return "never"

    before = datetime.now(UTC)
    status = await check_health("test", probe, "Test")
    await http.aclose()
    assert before <= status.checked_at <= datetime.now(UTC)
    assert status.ok is False
    assert status.provider == "test"
    assert status.error_code == "CONNECTION_FAILED"
    assert (
        status.error
        == f"Test is not running at http://127.0.0.1:{port}. Start it, or check TEST_HOST."
    )
    assert status.latency_ms is None
    assert status.version is None


async def test_an_unexpected_failure_names_what_was_checked() -> None:
    async def probe() -> str | None:
        raise RuntimeError("no idea")

    before = datetime.now(UTC)
    status = await check_health("test", probe, "Test at http://h:1")
    assert status == HealthStatus(
        ok=False,
        provider="test",
        checked_at=status.checked_at,
        error="Checking Test at http://h:1 failed: RuntimeError: no idea",
        error_code="PROVIDER_ERROR",
    )
    assert before <= status.checked_at <= datetime.now(UTC)


async def test_an_ollm_error_keeps_its_message_and_code() -> None:
    async def probe() -> str | None:
        raise ollm.AuthenticationError("The API key was refused.")

    status = await check_health("test", probe, "Test")
    assert status == HealthStatus(
        ok=False,
        provider="test",
        checked_at=status.checked_at,
        error="The API key was refused.",
        error_code="AUTH_FAILED",
    )
