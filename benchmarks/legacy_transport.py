"""BASELINE ONLY, never shipped: the hand-written transport that ollm-http replaced.

Kept here, as it was in ollm-ollama before ollm-http, so that every benchmark run
measures the new transport's CPU per streamed chunk against it on the same machine, in
the same run (the target: within 1.2x). It hangs on a signed chunk size, sends a POST
twice after a broken reply, and has the other faults listed in issue 11; do not use it.

Its original description follows.

ollm's own HTTP/1.1 transport for httpx, over anyio, for plain ``http://`` servers.

Ollama streams one NDJSON line per HTTP chunk. httpx's default stack parses each chunk
through h11, httpcore and httpx, layer by layer, and spends most of a reply's time
there; aiohttp's transport is faster but asyncio-only and slow to import. This
transport keeps httpx's API (requests, responses, exceptions, timeouts) and replaces
what is under it for the common case, a server on this machine or the LAN spoken to
in clear text: it reads the socket in 64 KiB blocks and strips the chunk framing of a
whole block in one pass, so each read gives the provider every complete line at once.
It runs on asyncio and trio alike, and imports nothing beyond anyio and httpx.

It does HTTP/1.1 with keep-alive, ``Content-Length``, chunked bodies (with extensions
and trailers) and bodies that end at close. TLS, proxies and HTTP/2 are httpx's job:
the provider uses this transport only for ``http://`` URLs with no proxy in the way.
"""

from __future__ import annotations

import contextlib
import select
import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import httpx
from anyio.abc import SocketAttribute

__all__ = ["PlainHTTPTransport"]

_READ = 65536
_MAX_HEAD = 65536
_MAX_IDLE = 32


class _Connection:
    """One socket to the server, and the bytes read from it but not used yet."""

    __slots__ = ("buffer", "key", "raw", "stream")

    def __init__(self, stream: anyio.abc.SocketStream, key: tuple[str, int]) -> None:
        self.stream = stream
        self.key = key
        self.buffer = b""
        self.raw: socket.socket | None = stream.extra(SocketAttribute.raw_socket, None)

    def closed_by_peer(self) -> bool:
        """Whether an idle connection is unusable: closed by the server, or not quiet.

        An idle HTTP/1.1 connection has nothing to read; if it is readable, the server
        closed it (or sent stray bytes), and a request on it would fail.
        """
        raw = self.raw
        if raw is None:
            return False
        try:
            readable, _, _ = select.select([raw], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    async def receive(self, timeout: float | None, request: httpx.Request) -> bytes:
        """The next bytes from the socket (``b""`` at its end)."""
        try:
            with anyio.fail_after(timeout):
                return await self.stream.receive(_READ)
        except anyio.EndOfStream:
            return b""
        except TimeoutError:
            raise httpx.ReadTimeout("timed out reading from the server", request=request) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise httpx.ReadError(
                f"reading from the server failed: {exc!r}", request=request
            ) from None

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await self.stream.aclose()


class _NetworkStream:
    """What ``response.extensions["network_stream"]`` offers: the socket, for an abort."""

    __slots__ = ("_connection",)

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection

    def get_extra_info(self, info: str) -> Any:
        return self._connection.raw if info == "socket" else None


class PlainHTTPTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over anyio for ``http://`` URLs, with a pool of kept-alive connections.

    One transport belongs to one event loop (its connections do); the provider makes a
    new one when the loop changes.
    """

    def __init__(self, *, max_idle: int = _MAX_IDLE) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._max_idle = max_idle
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(
                f"this transport speaks plain http only, not {url.scheme!r}", request=request
            )
        timeout: dict[str, float | None] = request.extensions.get("timeout", {})
        body = request.content if _is_read(request) else await request.aread()
        head = _request_head(request, len(body))
        reused = True
        while True:
            connection = self._take_idle(url.host, url.port or 80)
            if connection is None:
                reused = False
                connection = await self._connect(url.host, url.port or 80, timeout, request)
            try:
                await _send(
                    connection, head + body if len(body) < 65536 else head, timeout, request
                )
                if len(body) >= 65536:
                    await _send(connection, body, timeout, request)
                status, reason, headers = await _read_head(connection, timeout, request)
            except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
                await connection.aclose()
                if reused:
                    # A kept-alive connection the server closed meanwhile: once more, fresh.
                    reused = False
                    continue
                raise
            except BaseException:
                await connection.aclose()
                raise
            break
        stream = _Body(self, connection, request, status, headers, timeout.get("read"))
        return httpx.Response(
            status_code=status,
            headers=headers,
            stream=stream,
            request=request,
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": reason,
                "network_stream": _NetworkStream(connection),
            },
        )

    def _take_idle(self, host: str, port: int) -> _Connection | None:
        idle = self._idle.get((host, port))
        while idle:
            connection = idle.pop()
            if not connection.closed_by_peer():
                return connection
            # Dead: closing it needs no await worth waiting for.
            with contextlib.suppress(Exception):
                if connection.raw is not None:
                    connection.raw.close()
        return None

    async def _connect(
        self,
        host: str,
        port: int,
        timeout: dict[str, float | None],
        request: httpx.Request,
    ) -> _Connection:
        try:
            with anyio.fail_after(timeout.get("connect")):
                stream = await anyio.connect_tcp(host, port)
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"connecting to {host}:{port} timed out", request=request
            ) from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or repr(exc), request=request) from exc
        raw = stream.extra(SocketAttribute.raw_socket, None)
        if raw is not None:
            with contextlib.suppress(OSError):
                raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(stream, (host, port))

    def _release(self, connection: _Connection) -> bool:
        """Keep a connection whose response was read to its end; False if not kept."""
        if self._closed or connection.buffer:
            return False
        idle = self._idle.setdefault(connection.key, [])
        if len(idle) >= self._max_idle:
            return False
        idle.append(connection)
        return True

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                await connection.aclose()


def _is_read(request: httpx.Request) -> bool:
    try:
        request.content  # noqa: B018 - raises if the body is a stream not read yet
    except httpx.RequestNotRead:
        return False
    return True


def _request_head(request: httpx.Request, length: int) -> bytes:
    url = request.url
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), url.raw_path)]
    has_host = False
    for name, value in request.headers.raw:
        lowered = name.lower()
        if lowered in (b"transfer-encoding", b"content-length", b"connection"):
            continue
        if lowered == b"host":
            has_host = True
        lines.append(name + b": " + value)
    if not has_host:
        lines.append(b"Host: " + url.netloc)
    if length or request.method not in ("GET", "HEAD"):
        lines.append(b"Content-Length: %d" % length)
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _send(
    connection: _Connection, data: bytes, timeout: dict[str, float | None], request: httpx.Request
) -> None:
    try:
        with anyio.fail_after(timeout.get("write")):
            await connection.stream.send(data)
    except TimeoutError:
        raise httpx.WriteTimeout("timed out sending to the server", request=request) from None
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
        raise httpx.WriteError(f"sending to the server failed: {exc!r}", request=request) from None


async def _read_head(
    connection: _Connection, timeout: dict[str, float | None], request: httpx.Request
) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    """Status, reason and headers of the response (1xx answers skipped)."""
    while True:
        buffer = connection.buffer
        end = buffer.find(b"\r\n\r\n")
        while end < 0:
            if len(buffer) > _MAX_HEAD:
                raise httpx.RemoteProtocolError("the response head is too large", request=request)
            data = await connection.receive(timeout.get("read"), request)
            if not data:
                raise httpx.RemoteProtocolError(
                    "the server closed the connection without sending a response", request=request
                )
            buffer += data
            end = buffer.find(b"\r\n\r\n")
        head, connection.buffer = buffer[:end], buffer[end + 4 :]
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise httpx.RemoteProtocolError(
                f"not an HTTP/1.1 response: {lines[0][:80]!r}", request=request
            )
        status = int(parts[1])
        headers: list[tuple[bytes, bytes]] = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                raise httpx.RemoteProtocolError(f"bad header line {line[:80]!r}", request=request)
            headers.append((name, value.strip()))
        if 100 <= status < 200 and status != 101:
            continue  # 100 Continue and friends: the real answer follows
        return status, parts[2] if len(parts) > 2 else b"", headers


class _Body(httpx.AsyncByteStream):
    """A response body as it arrives, the chunk framing already taken off.

    Each item is everything that could be decoded from one read of the socket: for a
    stream of NDJSON, all the complete lines that arrived together.
    """

    def __init__(
        self,
        transport: PlainHTTPTransport,
        connection: _Connection,
        request: httpx.Request,
        status: int,
        headers: list[tuple[bytes, bytes]],
        read_timeout: float | None,
    ) -> None:
        self._transport = transport
        self._connection: _Connection | None = connection
        self._request = request
        self._read_timeout = read_timeout
        self._done = False
        self._keep = True
        self._chunked = False
        self._remaining: int | None = None  # Content-Length left to read
        for name, value in headers:
            lowered = name.lower()
            if lowered == b"transfer-encoding" and b"chunked" in value.lower():
                self._chunked = True
            elif lowered == b"content-length" and value.isdigit():
                self._remaining = int(value)
            elif lowered == b"connection" and b"close" in value.lower():
                self._keep = False
        if request.method == "HEAD" or status in (204, 304):
            self._remaining, self._chunked = 0, False
        if not self._chunked and self._remaining is None:
            self._keep = False  # the body ends when the server closes the connection

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        if self._chunked:
            async for data in self._chunks(connection):
                yield data
        else:
            async for data in self._plain(connection):
                yield data
        self._done = True
        await self._finish()

    async def _plain(self, connection: _Connection) -> AsyncIterator[bytes]:
        remaining = self._remaining
        data, connection.buffer = connection.buffer, b""
        while True:
            if remaining is not None:
                if len(data) >= remaining:
                    connection.buffer = data[remaining:]
                    if remaining:
                        yield data[:remaining]
                    return
                remaining -= len(data)
            if data:
                yield data
            data = await connection.receive(self._read_timeout, self._request)
            if not data:
                if remaining is None:
                    return  # the server closed: that was the end of the body
                raise httpx.RemoteProtocolError(
                    "the server closed the connection before the end of the body",
                    request=self._request,
                )

    async def _chunks(self, connection: _Connection) -> AsyncIterator[bytes]:
        buffer, connection.buffer = connection.buffer, b""
        position = 0
        pieces: list[bytes] = []
        append = pieces.append
        while True:
            # Take every complete chunk out of the buffer in one pass.
            while True:
                line_end = buffer.find(b"\r\n", position)
                if line_end < 0:
                    break
                size_text = buffer[position:line_end]
                semicolon = size_text.find(b";")
                if semicolon >= 0:
                    size_text = size_text[:semicolon]
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise httpx.RemoteProtocolError(
                        f"bad chunk size {buffer[position:line_end][:40]!r}", request=self._request
                    ) from None
                if size == 0:
                    # "0\r\n", any trailer lines, then an empty line.
                    trailer_end = buffer.find(b"\r\n\r\n", line_end)
                    if trailer_end < 0:
                        break  # the end is not all here yet
                    if pieces:
                        yield b"".join(pieces)
                    connection.buffer = buffer[trailer_end + 4 :]
                    return
                data_end = line_end + 2 + size
                if len(buffer) < data_end + 2:
                    break  # this chunk is not all here yet
                append(buffer[line_end + 2 : data_end])
                position = data_end + 2
            if pieces:
                yield pieces[0] if len(pieces) == 1 else b"".join(pieces)
                pieces.clear()
            if position:
                buffer = buffer[position:]
                position = 0
            data = await connection.receive(self._read_timeout, self._request)
            if not data:
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body "
                    "(incomplete chunked read)",
                    request=self._request,
                )
            buffer += data

    async def _finish(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if not (self._done and self._keep and self._transport._release(connection)):
            await connection.aclose()

    async def aclose(self) -> None:
        await self._finish()
