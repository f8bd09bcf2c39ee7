"""The transport and the client where a reply goes wrong: the error that comes out, the
settings that go in, and the connection slot that is given back (once).

Every server is a real socket on 127.0.0.1, on asyncio and trio.
"""

from __future__ import annotations

import logging
import shutil
import socket
import ssl
import struct
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.abc
import httpx
import pytest
from anyio.streams.tls import TLSAttribute
from raw_http import HANG, ok, raw_server, tls_server_context

import ollm
from ollm_http import ErrorContext, HTTPClient, HTTPConfig, HTTPTransport, Limits, Timeouts

pytestmark = pytest.mark.anyio

CONTEXT = ErrorContext(provider="Test", code_name="test", url_setting="TEST_HOST")
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def client(url: str, **kwargs: object) -> HTTPClient:
    return HTTPClient(HTTPConfig(url, context=CONTEXT, **kwargs))  # type: ignore[arg-type]


async def test_a_request_cut_off_while_sending_names_the_server_and_the_model() -> None:
    """The server reads a little of a large body, then resets the connection."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    received: list[bytes] = []

    async def reset(stream: anyio.abc.SocketStream) -> None:
        received.append(await stream.receive())
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.aclose()

    url = f"http://127.0.0.1:{port}"
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, reset)
        http = client(url)
        with pytest.raises(ollm.ConnectionFailedError) as caught:
            await http.request("POST", "/upload", content=b"x" * (32 << 20), model="m1")
        group.cancel_scope.cancel()
    await http.aclose()
    assert received[0].startswith(b"POST /upload HTTP/1.1\r\n")
    assert b"Content-Length: 33554432\r\n" in received[0]
    assert caught.value.message == (
        f"Test at {url} closed the connection without answering (RemoteProtocolError: the "
        "connection failed before any reply (BrokenResourceError)). Check that it is the "
        "right server and look at its log. Check TEST_HOST."
    )
    assert (caught.value.provider, caught.value.model) == ("test", "m1")


async def test_a_body_that_stalls_times_out_and_gives_its_slot_back_once() -> None:
    async def stall(request: bytes, stream: anyio.abc.ByteStream) -> None:
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab")
        await anyio.sleep_forever()

    async with raw_server([stall, ok(b"held"), ok(b"extra")]) as server:
        http = client(
            server.url,
            timeouts=Timeouts(read=0.2, pool=0.2),
            limits=Limits(max_connections=1),
        )
        got: list[bytes] = []

        async def read() -> None:
            async with http.stream("GET", "/stall", model="m1") as reply:
                async for block in reply.blocks():
                    got.append(block)

        with anyio.fail_after(30), pytest.raises(ollm.RequestTimeoutError) as caught:
            await read()
        assert got == [b"ab"]
        assert caught.value.message == (
            f"Test at {server.url} sent nothing for 0.2 s. Raise the read timeout."
        )
        assert (caught.value.provider, caught.value.model) == ("test", "m1")
        # The failed reply gave its one slot back: a second reply can take it, and while
        # that one is open a third request waits for the pool (the limit is still one).
        async with http.stream("GET", "/held") as held:
            with anyio.fail_after(30), pytest.raises(ollm.RequestTimeoutError) as busy:
                await http.request("GET", "/extra")
            assert await held.aread() == b"held"
        assert busy.value.message == (
            f"Every connection to Test at {server.url} stayed busy for too long (PoolTimeout: "
            f"no connection to 127.0.0.1:{server.port} was free within 0.2 s (at most 1 at "
            "once)). Lower the number of requests at once, or raise the connection limit."
        )
        assert server.paths() == ["/stall", "/held"]
        await http.aclose()


async def test_a_request_sends_its_json_and_its_content() -> None:
    async with raw_server([ok(b"one"), ok(b"two")]) as server:
        http = client(server.url)
        assert (await http.request("POST", "/json", json={"a": [1, 2]})).content == b"one"
        assert (await http.request("PUT", "/raw", content=b"raw bytes")).content == b"two"
        first, second = server.requests
        assert b"Content-Type: application/json\r\n" in first
        assert first.endswith(b'\r\n\r\n{"a":[1,2]}')
        assert second.endswith(b"\r\nContent-Length: 9\r\n\r\nraw bytes")
        await http.aclose()


async def test_a_request_waits_by_its_own_timeouts_not_the_clients() -> None:
    async with raw_server([HANG]) as server:
        # The client's own wait is for ever: only the request's timeout ends this one.
        http = client(server.url, timeouts=Timeouts(read=None))
        with anyio.fail_after(30), pytest.raises(ollm.RequestTimeoutError) as caught:
            await http.request("GET", "/", timeouts=Timeouts(read=0.2), model="m1")
        assert caught.value.message == (
            f"Test at {server.url} sent nothing for 0.2 s. Raise the read timeout."
        )
        assert caught.value.model == "m1"
        await http.aclose()


async def test_the_client_words_a_failure_for_its_own_address() -> None:
    http = client("http://127.0.0.1:9/v1/")
    made = http.error(httpx.ConnectError("refused"), model="m1")
    assert (
        made.message
        == "Test is not running at http://127.0.0.1:9/v1. Start it, or check TEST_HOST."
    )
    assert (made.provider, made.model) == ("test", "m1")
    timed = http.error(httpx.ReadTimeout("silent"), timeouts=Timeouts(read=7))
    assert (
        timed.message
        == "Test at http://127.0.0.1:9/v1 sent nothing for 7 s. Raise the read timeout."
    )


async def test_a_reply_that_is_not_http_names_the_server_and_the_model() -> None:
    async with raw_server([b"SSH-2.0-OpenSSH_9.6\r\n\r\n"]) as server:
        http = client(server.url)
        with pytest.raises(ollm.BadResponseError) as caught:
            await http.request("POST", "/chat", json={}, model="m1")
        message = caught.value.message
        assert message.startswith(
            f"Test at {server.url} answered with something that is not valid HTTP ("
        )
        assert message.endswith(f"). Check that {server.url} is the right server. Check TEST_HOST.")
        assert (caught.value.provider, caught.value.model) == ("test", "m1")
        await http.aclose()


async def test_httpx_with_the_transport_sees_a_read_timeout_in_words() -> None:
    async with raw_server([HANG]) as server:
        async with httpx.AsyncClient(transport=HTTPTransport()) as plain:
            with anyio.fail_after(30), pytest.raises(httpx.ReadTimeout) as caught:
                await plain.get(server.url, timeout=httpx.Timeout(30, read=0.2))
        assert str(caught.value) == "the server sent nothing for too long"
        assert caught.value.request.url == httpx.URL(server.url)


async def test_httpx_with_the_transport_sees_each_replys_http_version() -> None:
    replies = [b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"]
    replies.append(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nb")
    async with raw_server(replies) as server, httpx.AsyncClient(transport=HTTPTransport()) as plain:
        versions = [(await plain.get(server.url)).http_version for _ in replies]
    assert versions == ["HTTP/1.1", "HTTP/1.0"]


class _Closing(httpx.AsyncByteStream):
    """A body whose close takes a checkpoint, or fails."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"body"

    async def aclose(self) -> None:
        await anyio.lowlevel.checkpoint()
        if self.fail:
            raise RuntimeError("the socket was already gone")
        self.closed = True


def _serving(body: _Closing) -> HTTPClient:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=body))
    return HTTPClient(HTTPConfig("http://test.invalid", context=CONTEXT), transport=transport)


async def test_a_reply_is_closed_even_while_its_task_is_cancelled() -> None:
    body = _Closing()
    http = _serving(body)
    reply = await http.open("GET", "/")
    with anyio.CancelScope() as scope:
        scope.cancel()
        await reply.aclose()
    assert body.closed
    await http.aclose()


async def test_a_reply_whose_close_fails_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    http = _serving(_Closing(fail=True))
    reply = await http.open("GET", "/")
    with caplog.at_level(logging.DEBUG, logger="ollm_http"):
        await reply.aclose()
    [record] = [r for r in caplog.records if r.name == "ollm_http"]
    assert record.getMessage() == "closing a reply failed"
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "the socket was already gone"
    await http.aclose()


@needs_openssl
async def test_verify_takes_a_context_a_hashed_directory_or_false(
    certificate: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    cert = certificate[0]
    hashed = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", str(cert)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (tmp_path / f"{hashed}.0").write_bytes(cert.read_bytes())
    choices: list[bool | str | ssl.SSLContext] = [
        ssl.create_default_context(cafile=str(cert)),
        str(tmp_path),
        False,
    ]
    answers = [ok(b"%d" % i) for i in range(len(choices))]
    async with raw_server(answers, tls=tls_server_context(certificate)) as server:
        for i, verify in enumerate(choices):
            http = client(server.url, verify=verify, trust_env=False)
            assert (await http.request("GET", "/")).content == b"%d" % i
            await http.aclose()


@needs_openssl
async def test_the_transport_asks_for_http_1_1_by_alpn(certificate: tuple[Path, Path]) -> None:
    offered: list[str | None] = []

    async def answer(request: bytes, stream: anyio.abc.ByteStream) -> None:
        offered.append(stream.extra(TLSAttribute.alpn_protocol))
        await stream.send(ok())

    async with raw_server([answer], tls=tls_server_context(certificate)) as server:
        http = client(server.url, verify=str(certificate[0]))
        assert (await http.request("GET", "/")).content == b"ok"
        await http.aclose()
    assert offered == ["http/1.1"]


@needs_openssl
async def test_a_tls_record_broken_mid_reply_is_an_interrupted_stream(
    certificate: tuple[Path, Path],
) -> None:
    """The handshake went well and the reply began: a corrupt record later is a break of
    the stream (the partial reply is kept), not a failed handshake."""
    sent = anyio.Event()

    async def corrupt(request: bytes, stream: anyio.abc.ByteStream) -> None:
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
        await sent.wait()
        # Bytes that look like a TLS application-data record but are not encrypted.
        raw: anyio.abc.ByteStream = stream.transport_stream  # type: ignore[attr-defined]
        await raw.send(b"\x17\x03\x03\x00\x20" + b"\x00" * 32)
        await anyio.sleep_forever()

    async with raw_server([corrupt], tls=tls_server_context(certificate)) as server:
        http = client(server.url, verify=str(certificate[0]))
        got: list[bytes] = []

        async def read() -> None:
            async with http.stream("GET", "/", model="m1") as reply:
                async for block in reply.blocks():
                    got.append(block)
                    sent.set()

        with anyio.fail_after(30), pytest.raises(ollm.OllmError) as caught:
            await read()
        await http.aclose()
    assert got == [b"abc"]
    error = caught.value
    assert error.code == "STREAM_INTERRUPTED"
    prefix = (
        f"The connection to Test at {server.url} broke before the reply was complete "
        "(ReadError: SSLError: [SSL: "
    )
    assert error.message.startswith(prefix)
    assert error.message.endswith("). Try again; if it keeps happening, check the server's log.")
    assert (error.provider, error.model) == ("test", "m1")


@pytest.mark.parametrize(
    ("url", "shown", "why"),
    [
        ("http://127.0.0.1:x", "http://127.0.0.1:x", "InvalidURL: Invalid port: 'x'"),
        ("http://h:99999999999", "http://h:99999999999", "InvalidURL: Invalid port: 99999999999"),
        ("http://:8000/v1", "http://:8000/v1", "InvalidURL: it has no host"),
        ("http://[zz]:80", "http://[zz]:80", "InvalidURL: Invalid IPv6 address: '[zz]'"),
        # credentials never reach the message, even in a URL the parser refuses
        ("http://user:secret@[::1/v1", "http://[::1/v1", "InvalidURL: Invalid port: ':1'"),
        ("http://user:secret@:8000", "http://:8000", "InvalidURL: it has no host"),
    ],
)
async def test_an_address_no_request_can_go_to_is_refused_in_words(
    url: str, shown: str, why: str
) -> None:
    http = client(url)
    with pytest.raises(ollm.InvalidRequestError) as caught:
        await http.request("GET", "/")
    assert caught.value.message == (
        f"The address {shown} is not usable for Test ({why}). Check TEST_HOST."
    )


def test_the_base_url_loses_its_trailing_slashes_and_nothing_else() -> None:
    assert client("http://127.0.0.1:9/apiX//").base_url == "http://127.0.0.1:9/apiX"


async def test_the_transport_takes_a_request_without_timeouts() -> None:
    """A request built by hand (no ``timeout`` extension, as httpx's client adds) waits
    for ever at each step, as httpx's own transport does."""
    async with raw_server([ok(b"plain")]) as server:
        transport = HTTPTransport()
        response = await transport.handle_async_request(httpx.Request("GET", server.url))
        assert response.status_code == 200
        assert await response.aread() == b"plain"
        await response.aclose()
        await transport.aclose()
