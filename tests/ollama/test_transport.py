"""ollm's own HTTP/1.1 transport, against a real socket server on 127.0.0.1."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_ollama._transport import PlainHTTPTransport

pytestmark = pytest.mark.anyio

RawServer = Any  # conftest.RawServer
RawConnection = Any
RawRequest = Any

LINES = [b'{"message":{"content":"%d"},"done":false}\n' % i for i in range(40)]
FRAMED = b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in LINES) + b"0\r\n\r\n"
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def _connections(server: RawServer) -> int:
    return len(server._conns)


async def _client(server: RawServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, transport=PlainHTTPTransport())


async def _body(client: httpx.AsyncClient, path: str = "/x", method: str = "GET") -> bytes:
    async with client.stream(method, path) as response:
        return b"".join([part async for part in response.aiter_raw()])


@given(cuts=st.lists(st.integers(1, len(HEAD) + len(FRAMED) - 1), max_size=12, unique=True))
async def test_a_chunked_body_cut_anywhere_reads_whole(
    anyio_backend: str, raw_server: RawServer, cuts: list[int]
) -> None:
    data = HEAD + FRAMED
    points = [0, *sorted(cuts), len(data)]

    def handler(conn: RawConnection, request: RawRequest) -> None:
        for start, end in itertools.pairwise(points):
            conn.send(data[start:end])
            time.sleep(0.0005)

    raw_server.routes["/x"] = handler
    async with await _client(raw_server) as client:
        assert await _body(client) == b"".join(LINES)


async def test_chunk_extensions_and_trailers(anyio_backend: str, raw_server: RawServer) -> None:
    def handler(conn: RawConnection, request: RawRequest) -> None:
        conn.send(HEAD + b"5;name=value\r\nhello\r\n1\r\n!\r\n0\r\nX-Trailer: yes\r\n\r\n")

    raw_server.routes["/x"] = handler
    async with await _client(raw_server) as client:
        assert await _body(client) == b"hello!"
        assert await _body(client) == b"hello!"
    assert _connections(raw_server) == 1  # the trailers were read: the connection was reused


async def test_content_length_bodies_keep_the_connection(
    anyio_backend: str, raw_server: RawServer
) -> None:
    raw_server.routes["/x"] = lambda conn, request: conn.respond(200, b'{"ok":true}')
    async with await _client(raw_server) as client:
        for _ in range(3):
            response = await client.get("/x")
            assert response.json() == {"ok": True}
    assert _connections(raw_server) == 1


async def test_a_body_that_ends_at_close(anyio_backend: str, raw_server: RawServer) -> None:
    def handler(conn: RawConnection, request: RawRequest) -> bool:
        conn.send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
        return True  # close

    raw_server.routes["/x"] = handler
    async with await _client(raw_server) as client:
        assert (await client.get("/x")).content == b"until the end"
        assert (await client.get("/x")).content == b"until the end"
    assert _connections(raw_server) == 2


async def test_head_and_no_content_have_no_body(anyio_backend: str, raw_server: RawServer) -> None:
    def handler(conn: RawConnection, request: RawRequest) -> None:
        conn.send(
            b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n"
            if request.method == "HEAD"
            else b"HTTP/1.1 204 No Content\r\n\r\n"
        )

    raw_server.routes["/x"] = handler
    async with await _client(raw_server) as client:
        head = await client.head("/x")
        assert (head.status_code, head.content) == (200, b"")
        empty = await client.delete("/x")
        assert (empty.status_code, empty.content) == (204, b"")
    assert _connections(raw_server) == 1


async def test_an_informational_answer_is_skipped(
    anyio_backend: str, raw_server: RawServer
) -> None:
    raw_server.routes["/x"] = lambda conn, request: conn.send(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    )
    async with await _client(raw_server) as client:
        assert (await client.get("/x")).text == "ok"


async def test_the_request_is_what_httpx_built(anyio_backend: str, raw_server: RawServer) -> None:
    raw_server.routes["/api/x"] = lambda conn, request: conn.respond(200, b"{}")
    async with await _client(raw_server) as client:
        await client.post("/api/x?a=1&b=%20", content=b'{"k":1}', headers={"X-Team": "a"})
        await client.get("/api/x")
    post, get = raw_server.requests
    assert post.line == "POST /api/x?a=1&b=%20 HTTP/1.1"
    assert post.headers["host"] == f"127.0.0.1:{raw_server.port}"
    assert post.headers["content-length"] == "7"
    assert post.headers["x-team"] == "a"
    assert post.body == b'{"k":1}'
    assert "content-length" not in get.headers


async def test_a_large_body_is_sent_whole(anyio_backend: str, raw_server: RawServer) -> None:
    raw_server.routes["/x"] = lambda conn, request: conn.respond(200, b"%d" % len(request.body))
    async with await _client(raw_server) as client:
        assert (await client.post("/x", content=b"z" * 300_000)).text == "300000"


async def test_an_idle_connection_the_server_closed_is_replaced(
    anyio_backend: str, raw_server: RawServer
) -> None:
    def once(conn: RawConnection, request: RawRequest) -> bool:
        conn.respond(200, b"fine")
        return True  # the server closes the kept-alive connection behind the client's back

    raw_server.routes["/x"] = once
    async with await _client(raw_server) as client:
        assert (await client.get("/x")).text == "fine"
        await anyio.sleep(0.05)
        assert (await client.get("/x")).text == "fine"
    assert _connections(raw_server) == 2


async def test_closing_a_response_early_closes_its_connection(
    anyio_backend: str, raw_server: RawServer
) -> None:
    raw_server.routes["/x"] = lambda conn, request: conn.stream_until_closed(LINES[0])
    async with await _client(raw_server) as client, client.stream("GET", "/x") as response:
        async for _ in response.aiter_raw():
            break
    with anyio.fail_after(10):
        while not raw_server.client_closed.is_set():
            await anyio.sleep(0.01)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (HEAD + b"zz\r\nhello\r\n", "bad chunk size"),
        (HEAD + b"5\r\nhel", "incomplete chunked read"),
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.1 response"),
        (b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n", "bad header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "before the end of the body"),
        (b"", "without sending a response"),
    ],
)
async def test_a_broken_answer_is_a_protocol_error(
    anyio_backend: str, raw_server: RawServer, answer: bytes, error: str
) -> None:
    def handler(conn: RawConnection, request: RawRequest) -> bool:
        conn.send(answer)
        return True

    raw_server.routes["/x"] = handler
    async with await _client(raw_server) as client:
        with pytest.raises(httpx.RemoteProtocolError, match=error):
            await _body(client)


async def test_refused_and_timed_out(
    anyio_backend: str, raw_server: RawServer, closed_port: str
) -> None:
    async with httpx.AsyncClient(transport=PlainHTTPTransport()) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(closed_port)
    raw_server.routes["/slow"] = lambda conn, request: time.sleep(0.5)
    async with httpx.AsyncClient(transport=PlainHTTPTransport(), timeout=0.1) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(raw_server.url + "/slow")


async def test_https_is_not_its_job(anyio_backend: str) -> None:
    async with httpx.AsyncClient(transport=PlainHTTPTransport()) as client:
        with pytest.raises(httpx.UnsupportedProtocol):
            await client.get("https://127.0.0.1:1/")


async def test_it_yields_every_line_that_arrived_together(
    anyio_backend: str, raw_server: RawServer
) -> None:
    """One read of the socket gives one item with all its complete lines (the fast path)."""

    def handler(conn: RawConnection, request: RawRequest) -> None:
        conn.send(HEAD + FRAMED)

    raw_server.routes["/x"] = handler
    async with await _client(raw_server) as client, client.stream("GET", "/x") as response:
        parts = [part async for part in _raw(response)]
    assert b"".join(parts) == b"".join(LINES)
    assert len(parts) < len(LINES)


async def _raw(response: httpx.Response) -> AsyncIterator[bytes]:
    async for part in response.aiter_raw():
        yield part
