"""``HTTPTransport`` under a plain ``httpx.AsyncClient``, as its README offers it.

From the mutation run of ``ollm_http._transport``: what the transport promises on its own,
without ``HTTPClient`` in front (which checks headers and words errors itself): headers
that would corrupt the request, its own framing, the connect and write timeouts, TLS as
servers really close it, and closing while a reply is open. Real sockets on 127.0.0.1.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import anyio
import anyio.abc
import httpx
import pytest
from raw_http import CLOSE, HANG, raw_server, tls_server_context
from runtime_helpers import settle

import ollm
from ollm_http import HTTPTransport

pytestmark = pytest.mark.anyio


def ok(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def plain(**kwargs: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=HTTPTransport(**kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        (
            {"X-Key": "k\r\nX-Forged: 1"},
            "The HTTP header 'X-Key' has a line break or NUL character in its value",
        ),
        (
            {"X-Key\n": "k"},
            "The HTTP header 'X-Key\\n' has a line break or NUL character in its name",
        ),
        (
            {"X-Key": "a\0b"},
            "The HTTP header 'X-Key' has a line break or NUL character in its value",
        ),
    ],
)
async def test_a_header_that_would_corrupt_the_request_is_refused_before_sending(
    headers: dict[str, str], words: str
) -> None:
    async with raw_server([ok(b"never")]) as server, plain() as client:
        with pytest.raises(ollm.InvalidRequestError) as refused:
            await client.get(server.url, headers=headers)
    assert refused.value.message.startswith(words)
    assert server.requests == []


async def test_the_transport_frames_the_body_itself_and_keeps_the_other_headers() -> None:
    async with raw_server([ok(b"a")]) as server, plain() as client:
        headers = {"Content-Length": "999", "X-After": "kept", "Transfer-Encoding": "chunked"}
        await client.post(server.url, content=b"hello", headers=headers)
    head = server.requests[0].lower()
    assert head.count(b"content-length:") == 1
    assert b"content-length: 5\r\n" in head
    assert b"transfer-encoding" not in head
    assert b"x-after: kept\r\n" in head


@pytest.mark.parametrize(
    ("method", "content", "length"),
    [
        ("POST", b"", b"0"),
        ("PUT", b"", b"0"),
        ("PATCH", b"", b"0"),
        ("GET", b"", None),
        ("HEAD", b"", None),
        ("DELETE", b"", None),
        ("OPTIONS", b"", None),
        ("DELETE", b"gone", b"4"),
    ],
)
async def test_a_content_length_is_sent_when_a_body_is_or_may_be_expected(
    method: str, content: bytes, length: bytes | None
) -> None:
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    async with raw_server([reply]) as server, plain() as client:
        await client.request(method, server.url, content=content)
    head = server.requests[0].split(b"\r\n\r\n")[0].lower()
    sent = [
        line.split(b": ")[1] for line in head.split(b"\r\n") if line.startswith(b"content-length")
    ]
    assert sent == ([] if length is None else [length])


async def test_certificates_are_checked_by_default(certificate: tuple[Path, Path]) -> None:
    async with (
        raw_server([ok(b"never")], tls=tls_server_context(certificate)) as server,
        plain() as client,
    ):
        with pytest.raises(httpx.ConnectError) as refused:
            await client.get(server.url)
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
    assert server.requests == []


async def test_a_tls_handshake_that_never_ends_is_a_connect_timeout() -> None:
    """A server that accepts and never speaks TLS: the connect timeout covers the handshake."""
    async with raw_server([HANG]) as server, plain() as client:
        url = server.url.replace("http://", "https://")
        with anyio.fail_after(30), pytest.raises(httpx.ConnectTimeout) as caught:
            await client.get(url, timeout=httpx.Timeout(30, connect=0.2))
    assert str(caught.value) == f"connecting to 127.0.0.1:{server.port} took longer than 0.2 s"


async def test_a_server_that_stops_reading_is_a_write_timeout() -> None:
    """A listener that never accepts: the kernel takes the connection and fills its small
    receive buffer, then the client's writes wait. (A server task that merely never calls
    receive() is no such server on asyncio: anyio's protocol reads into memory anyway, and
    on a fast machine took all 64 MiB within the write timeout.)"""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        async with plain() as client:
            with anyio.fail_after(30), pytest.raises(httpx.WriteTimeout) as caught:
                await client.post(
                    f"http://127.0.0.1:{port}",
                    content=b"x" * (64 << 20),  # more than the socket buffers hold
                    timeout=httpx.Timeout(30, write=0.2),
                )
    assert str(caught.value) == "sending the request took too long"


async def test_a_tls_reply_that_ends_at_close_without_a_goodbye_is_whole(
    certificate: tuple[Path, Path],
) -> None:
    """Servers close TLS without close_notify all the time: the body to the close is whole."""
    unframed = (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end", CLOSE)
    context = ssl.create_default_context(cafile=str(certificate[0]))
    async with (
        raw_server([unframed], tls=tls_server_context(certificate)) as server,
        plain(verify=context) as client,
    ):
        assert (await client.get(server.url)).content == b"to the end"


async def test_a_reply_finished_after_the_transport_closed_closes_its_connection() -> None:
    async with raw_server([ok(b"one")]) as server:
        transport = HTTPTransport()
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream("GET", server.url) as reply:
                await transport.aclose()  # the reply is still open: its connection is not idle
                assert await reply.aread() == b"one"
            await settle(lambda: server.open_now == 0)  # closed, not kept for a next request


async def test_a_url_that_is_not_http_is_refused_in_words() -> None:
    async with plain() as client:
        with pytest.raises(httpx.UnsupportedProtocol) as refused:
            await client.get("ftp://127.0.0.1/file")
    assert str(refused.value) == "the URL scheme 'ftp' is not http or https"
