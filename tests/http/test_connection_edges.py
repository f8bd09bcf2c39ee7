"""One connection's edges, from the mutation run of ``ollm_http._connection``.

What the reply parser must refuse (control characters in header values, a protocol
switch, an endless head, a reply cut inside its head), and when a connection must not
carry another request (bytes after the reply, a HEAD reply, an expired idle
connection). Every test talks to a real socket on 127.0.0.1, on asyncio and trio.
"""

from __future__ import annotations

import socket
import struct

import anyio
import anyio.abc
import pytest
from raw_http import CLOSE, raw_server

import ollm
from ollm_http import ErrorContext, HTTPClient, HTTPConfig, Limits, Timeouts

pytestmark = pytest.mark.anyio

CONTEXT = ErrorContext(provider="Test", code_name="test", url_setting="TEST_HOST")


def client(url: str, **kwargs: object) -> HTTPClient:
    return HTTPClient(HTTPConfig(url, context=CONTEXT, **kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (b"a\x00b", "a header value holds a NUL character"),
        (b"a\rb", "Missing expected LF after header value"),  # llhttp's own words
    ],
)
async def test_a_control_character_in_a_reply_header_is_a_bad_response(
    value: bytes, why: str
) -> None:
    reply = b"HTTP/1.1 200 OK\r\nX-Odd: " + value + b"\r\nContent-Length: 2\r\n\r\nhi"
    async with raw_server([reply]) as server:
        http = client(server.url)
        with pytest.raises(ollm.BadResponseError) as caught:
            await http.request("GET", "/")
        assert caught.value.message == not_http(server.url, why)
        await http.aclose()


async def test_a_protocol_switch_is_refused() -> None:
    switch = (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    )
    async with raw_server([switch]) as server:
        http = client(server.url)
        with pytest.raises(ollm.BadResponseError) as caught:
            await http.request("GET", "/")
        assert caught.value.message == not_http(
            server.url, "the server switched protocols, which ollm does not do"
        )
        await http.aclose()


async def test_an_endless_head_is_refused_in_bounded_memory() -> None:
    header = b"X-Filler: " + b"x" * 1000 + b"\r\n"
    endless = b"HTTP/1.1 200 OK\r\n" + header * 70  # 70 KB, and never an empty line
    async with raw_server([endless]) as server:
        # The head is refused as it grows: never a wait for the rest (a read timeout).
        http = client(server.url, timeouts=Timeouts(read=10))
        with pytest.raises(ollm.BadResponseError) as caught:
            await http.request("GET", "/")
        assert "the reply's head is longer than 65536 bytes" in str(caught.value)
        await http.aclose()


async def test_a_head_just_under_the_limit_is_read() -> None:
    header = b"X-Filler: " + b"x" * 1000 + b"\r\n"
    reply = b"HTTP/1.1 200 OK\r\n" + header * 60 + b"Content-Length: 2\r\n\r\nhi"
    async with raw_server([reply]) as server:
        http = client(server.url)
        assert (await http.request("GET", "/")).content == b"hi"
        await http.aclose()


async def test_a_reply_cut_inside_its_head_says_so() -> None:
    async with raw_server([(b"HTTP/1.1 200 OK\r\nContent-Le", CLOSE)]) as server:
        http = client(server.url)
        with pytest.raises(ollm.OllmError) as caught:
            await http.request("POST", "/", json={})
        assert caught.value.message == not_http(
            server.url, "the server closed the connection in the middle of its reply"
        )
        await http.aclose()


async def test_a_server_that_answers_nothing_says_so() -> None:
    async with raw_server([CLOSE]) as server:
        http = client(server.url)
        with pytest.raises(ollm.ConnectionFailedError) as caught:
            await http.request("POST", "/", json={})
        assert caught.value.message == (
            f"Test at {server.url} closed the connection without answering (NoReplyError:"
            " Server disconnected without sending a response.). Check that it is the right"
            " server and look at its log. Check TEST_HOST."
        )
        await http.aclose()


async def test_keep_alive_carries_requests_on_one_connection() -> None:
    async with raw_server([ok_body(b"one"), ok_body(b"two"), ok_body(b"three")]) as server:
        http = client(server.url)
        for expected in (b"one", b"two", b"three"):
            assert (await http.request("GET", "/")).content == expected
        assert server.connections == 1
        await http.aclose()


async def test_bytes_after_a_reply_keep_it_whole_but_retire_the_connection() -> None:
    async with raw_server([ok_body(b"one") + b"GARBAGE\r\n", ok_body(b"two")]) as server:
        http = client(server.url)
        assert (await http.request("POST", "/a", json={})).content == b"one"
        assert (await http.request("POST", "/b", json={})).content == b"two"
        assert server.connections == 2
        assert server.paths() == ["/a", "/b"]
        await http.aclose()


async def test_a_head_reply_is_read_without_a_body_and_its_connection_retired() -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
    async with raw_server([head, ok_body(b"two")]) as server:
        http = client(server.url)
        reply = await http.request("HEAD", "/")
        assert (reply.status, reply.content) == (200, b"")
        assert (await http.request("GET", "/")).content == b"two"
        assert server.connections == 2
        await http.aclose()


async def test_an_expired_idle_connection_is_not_used() -> None:
    async with raw_server([ok_body(b"one"), ok_body(b"two")]) as server:
        http = client(server.url, limits=Limits(keepalive_expiry=0.0))
        assert (await http.request("GET", "/")).content == b"one"
        assert (await http.request("GET", "/")).content == b"two"
        assert server.connections == 2
        await http.aclose()


async def test_an_idle_connection_the_server_reset_is_not_used_for_a_post() -> None:
    """A reset (RST, not FIN) makes the idle check fail with an error: not reusable."""
    reset = anyio.Event()

    async def answer_then_reset(request: bytes, stream: anyio.abc.ByteStream) -> None:
        await stream.send(ok_body(b"one"))
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.aclose()  # on loopback the RST is in the client's socket at once
        reset.set()

    async with raw_server([answer_then_reset, ok_body(b"two")]) as server:
        http = client(server.url)
        assert (await http.request("POST", "/a", json={})).content == b"one"
        await reset.wait()
        assert (await http.request("POST", "/b", json={})).content == b"two"
        assert server.paths() == ["/a", "/b"]  # the POST was sent once, on a new connection
        assert server.connections == 2
        await http.aclose()


async def test_no_more_than_max_idle_connections_are_kept_between_requests() -> None:
    """Two replies at once need two connections; with max_idle=1 only one is kept."""

    def in_pairs() -> object:
        pair = anyio.Event()
        waiting = 0

        async def answer(request: bytes, stream: anyio.abc.ByteStream) -> None:
            nonlocal waiting
            waiting += 1
            if waiting == 2:
                pair.set()
            await pair.wait()  # both requests are out: each holds its own connection
            await stream.send(ok_body(b"ok"))

        return answer

    first, second = in_pairs(), in_pairs()
    async with raw_server([first, first, second, second]) as server:  # type: ignore[list-item]
        http = client(server.url, limits=Limits(max_idle=1))
        for _ in range(2):
            async with anyio.create_task_group() as group:
                for _ in range(2):
                    group.start_soon(http.request, "GET", "/")
        # The second pair found one connection kept, and opened one more.
        assert server.connections == 3
        await http.aclose()


async def test_a_chunked_body_in_many_pieces_is_joined_in_order() -> None:
    chunks = b"".join(b"1\r\n%s\r\n" % bytes([c]) for c in b"abcdefghij")
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    async with raw_server([reply, ok_body(b"next")]) as server:
        http = client(server.url)
        assert (await http.request("GET", "/")).content == b"abcdefghij"
        assert (await http.request("GET", "/")).content == b"next"
        assert server.connections == 1
        await http.aclose()


@pytest.mark.parametrize("stack", ["builtin", "httpx"])
async def test_whole_chunks_before_a_bad_chunk_header_are_delivered_then_the_error(
    stack: str,
) -> None:
    """All in one write, so in one read: what was whole comes first, as h11 gives it."""
    whole = b"9\r\n" + b'{"a": 1}\n' + b"\r\n" + b"9\r\n" + b'{"b": 2}\n' + b"\r\n"
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + whole + b"zz\r\nbad\r\n"
    async with raw_server([reply]) as server:
        http = HTTPClient(HTTPConfig(server.url, context=CONTEXT), stack=stack)  # type: ignore[arg-type]
        got: list[bytes] = []

        async def read() -> None:
            async with http.stream("POST", "/chat", json={}) as streamed:
                async for line in streamed.lines():
                    got.append(line)

        with pytest.raises(ollm.OllmError) as caught:
            await read()
        assert got == [b'{"a": 1}', b'{"b": 2}']
        assert caught.value.code in ("BAD_RESPONSE", "STREAM_INTERRUPTED")
        if stack == "builtin":
            assert caught.value.code == "BAD_RESPONSE"
            assert "not valid HTTP (Invalid character in chunk size)" in caught.value.message
        await http.aclose()


async def test_chunk_sizes_followed_by_spaces_are_read() -> None:
    """Some servers pad the chunk size ("5  " then CRLF): llhttp is told to allow it."""
    padded = b"5  \r\nhello\r\n0  \r\n\r\n"
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + padded
    async with raw_server([reply]) as server:
        http = client(server.url)
        assert (await http.request("GET", "/")).content == b"hello"
        await http.aclose()


@pytest.mark.parametrize("encoding", [b"chunked", b"gzip, Chunked"])
async def test_a_chunked_body_cut_short_is_an_interrupted_stream(encoding: bytes) -> None:
    """Cut at a chunk's end, before the last chunk: never taken for a whole body."""
    cut = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: " + encoding + b"\r\n\r\n5\r\nhello\r\n", CLOSE)
    async with raw_server([cut]) as server:
        http = client(server.url)
        with pytest.raises(ollm.StreamInterruptedError) as caught:
            await http.request("GET", "/")
        assert caught.value.message == (
            f"The connection to Test at {server.url} broke before the reply was complete "
            "(RemoteProtocolError: peer closed connection without sending complete message "
            "body). Try again; if it keeps happening, check the server's log."
        )
        await http.aclose()


async def test_a_body_that_ends_at_close_is_whole_and_its_connection_retired() -> None:
    unframed = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip-not\r\n\r\nto the end", CLOSE)
    async with raw_server([unframed, ok_body(b"next")]) as server:
        http = client(server.url)
        assert (await http.request("GET", "/")).content == b"to the end"
        assert (await http.request("GET", "/")).content == b"next"
        assert server.connections == 2
        await http.aclose()


def not_http(url: str, why: str) -> str:
    """The words of a reply that is not valid HTTP."""
    return (
        f"Test at {url} answered with something that is not valid HTTP ({why}). Check that"
        f" {url} is the right server. Check TEST_HOST."
    )


def ok_body(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
