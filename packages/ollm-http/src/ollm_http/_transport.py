"""An httpx transport on anyio and llhttp: pooled HTTP/1.1 connections, plain or TLS.

httpx keeps its part (URLs, headers, redirects, authentication, the response object);
this replaces what is under it (httpcore and h11) with one layer: a socket per
connection, read in 64 KiB blocks handed to llhttp, so a streamed reply costs one
parser call per block, not several Python layers per chunk. It runs on asyncio and
trio alike.

The promises it keeps:

- A request the server may have received is never sent twice, unless its method is
  GET or HEAD: an idle connection is checked before use, and a request that fails on
  a reused connection is retried on a new one only if nothing came back and the
  method is safe to repeat.
- A connection returns to the pool only when its reply was read to a clean end and
  the reply has been closed; anything else (an abort, a cancelled read, stray bytes,
  ``Connection: close``, HTTP/1.0) closes it.
- At most ``Limits.max_connections`` connections per server; further requests wait
  for one (up to the pool timeout) instead of failing when descriptors run out.
"""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import httpx
from anyio.streams.tls import TLSStream

from ollm_http._config import Limits, check_header
from ollm_http._connection import BadHTTPError, Connection, NoReplyError
from ollm_http._tls import ssl_context

__all__ = ["HTTPTransport"]

log = logging.getLogger("ollm_http")

_SAFE_TO_REPEAT = frozenset({"GET", "HEAD"})
_FORBIDDEN = re.compile(rb"[\r\n\0]")
_HOP_HEADERS = frozenset({b"content-length", b"transfer-encoding"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


class _Origin:
    """The connections to one server (scheme, host, port)."""

    __slots__ = ("idle", "slots")

    def __init__(self, limit: int) -> None:
        self.idle: list[Connection] = []
        self.slots = anyio.Semaphore(limit)


class HTTPTransport(httpx.AsyncBaseTransport):
    """ollm's HTTP/1.1 transport for ``httpx.AsyncClient``: ``transport=HTTPTransport()``.

    One instance belongs to the event loop that first uses it (as an httpx client
    does). ``verify`` is ``True`` (the system's authorities, or ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR``), ``False``, a CA bundle's path, or an ``ssl.SSLContext``.
    """

    def __init__(
        self, *, limits: Limits | None = None, verify: bool | str | ssl.SSLContext = True
    ) -> None:
        self._limits = limits or Limits()
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._origins: dict[tuple[str, str, int], _Origin] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and return its reply, whose body streams from the socket."""
        url = request.url
        scheme = url.scheme
        if scheme not in _DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(f"the URL scheme {scheme!r} is not http or https")
        key = (scheme, url.host, url.port or _DEFAULT_PORTS[scheme])
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        body = await request.aread()
        head = _request_head(request, body)
        origin = self._origins.get(key)
        if origin is None:
            origin = self._origins[key] = _Origin(self._limits.max_connections)
        try:
            with anyio.fail_after(timeouts.get("pool")):
                await origin.slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout(
                f"no connection to {key[1]}:{key[2]} was free within {timeouts.get('pool')} s "
                f"(at most {self._limits.max_connections} at once)"
            ) from None
        try:
            connection, status, version, headers = await self._exchange(
                request, key, origin, (head, body), timeouts
            )
        except BaseException:
            origin.slots.release()
            raise
        reply = _Body(self, origin, connection, timeouts.get("read"))
        return httpx.Response(
            status,
            headers=headers,
            stream=reply,
            extensions={
                "http_version": f"HTTP/{version}".encode(),
                "network_stream": _NetworkStream(connection),
            },
        )

    async def _exchange(
        self,
        request: httpx.Request,
        key: tuple[str, str, int],
        origin: _Origin,
        data: tuple[bytes, bytes],
        timeouts: dict[str, float | None],
    ) -> tuple[Connection, int, str, list[tuple[bytes, bytes]]]:
        head_only = request.method == "HEAD"
        while True:
            connection = await self._take_idle(origin)
            reused = connection is not None
            if connection is None:
                connection = await self._connect(key, timeouts.get("connect"))
            try:
                try:
                    await connection.send(data, timeouts.get("write"))
                except TimeoutError:
                    raise httpx.WriteTimeout("sending the request took too long") from None
                status, version, headers = await connection.read_head(
                    timeouts.get("read"), head_only=head_only
                )
                return connection, status, version, headers
            except BaseException as exc:
                await connection.aclose()
                # Only a safe request, on a reused connection, that got nothing back.
                retry = (
                    reused
                    and request.method in _SAFE_TO_REPEAT
                    and not connection.received_any
                    and isinstance(exc, (OSError, anyio.BrokenResourceError, NoReplyError))
                )
                if retry:
                    log.debug("a kept-alive connection to %s failed (%r); retrying", key, exc)
                    continue
                raise _as_httpx(exc, connection) from exc

    async def _take_idle(self, origin: _Origin) -> Connection | None:
        idle = origin.idle
        expiry = self._limits.keepalive_expiry
        while idle:
            connection = idle.pop()
            if connection.is_reusable(expiry):
                return connection
            # Closed by the server, expired, or holding stray bytes: drop it.
            await connection.aclose()
        return None

    async def _connect(self, key: tuple[str, str, int], timeout: float | None) -> Connection:
        scheme, host, port = key
        try:
            with anyio.fail_after(timeout):
                stream: anyio.abc.ByteStream = await anyio.connect_tcp(host, port)
                if scheme == "https":
                    stream = await TLSStream.wrap(
                        stream,
                        hostname=host,
                        ssl_context=self._ssl_context(),
                        standard_compatible=False,
                    )
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"connecting to {host}:{port} took longer than {timeout:g} s"
            ) from None
        except (OSError, anyio.BrokenResourceError) as exc:
            raise httpx.ConnectError(_describe(exc)) from exc
        return Connection(stream)

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            context = ssl_context(self._verify)
            context.set_alpn_protocols(["http/1.1"])
            self._ssl = context
        return self._ssl

    async def _release(self, origin: _Origin, connection: Connection, *, clean: bool) -> None:
        """Back to the pool if clean and wanted, else closed; frees the slot either way."""
        try:
            if (
                clean
                and not self._closed
                and connection.finish()
                and len(origin.idle) < self._limits.max_idle
            ):
                origin.idle.append(connection)
                return
            await connection.aclose()
        finally:
            origin.slots.release()

    async def aclose(self) -> None:
        """Close every idle connection; replies still open close theirs when done."""
        self._closed = True
        for origin in self._origins.values():
            idle, origin.idle = origin.idle, []
            for connection in idle:
                await connection.aclose()


class _Body(httpx.AsyncByteStream):
    """A reply's body, block by block, straight from the socket."""

    __slots__ = ("_connection", "_done", "_origin", "_read_timeout", "_transport")

    def __init__(
        self,
        transport: HTTPTransport,
        origin: _Origin,
        connection: Connection,
        read_timeout: float | None,
    ) -> None:
        self._transport = transport
        self._origin = origin
        self._connection = connection
        self._read_timeout = read_timeout
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        timeout = self._read_timeout
        try:
            while True:
                block = await connection.read_body(timeout)
                if block is None:
                    return  # the connection is released by aclose(), not here
                yield block
        except BaseException as exc:
            await self._finish(clean=False)
            if isinstance(exc, (TimeoutError, OSError, anyio.BrokenResourceError, BadHTTPError)):
                raise _as_httpx(exc, connection) from exc
            raise

    async def _finish(self, *, clean: bool) -> None:
        if self._done:
            return
        self._done = True
        connection = self._connection
        await self._transport._release(
            self._origin, connection, clean=clean and connection.complete
        )

    async def aclose(self) -> None:
        """The reply is closed: its connection goes back to the pool if the reply was read
        to a clean end, and is closed otherwise.

        Only here, never when the last byte is read: until its reply is closed, its
        reader may still act on the socket (an abort that shuts it, from any thread).
        """
        await self._finish(clean=self._connection.complete)


class _NetworkStream:
    """``response.extensions["network_stream"]``: the socket, for an abort to shut."""

    __slots__ = ("_connection",)

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def get_extra_info(self, info: str) -> Any:
        if info == "socket":
            return self._connection.stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        return None


def _request_head(request: httpx.Request, body: bytes) -> bytes:
    url = request.url
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), url.raw_path)]
    for name, value in request.headers.raw:
        if name.lower() in _HOP_HEADERS:
            continue
        if _FORBIDDEN.search(name) or _FORBIDDEN.search(value):
            check_header(name.decode("latin-1"), value.decode("latin-1"))
        lines.append(name + b": " + value)
    if body or request.method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
        lines.append(b"Content-Length: %d" % len(body))
    lines.append(b"")
    lines.append(b"")
    return b"\r\n".join(lines)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _as_httpx(exc: BaseException, connection: Connection) -> BaseException:
    """The httpx exception for a failure under it (httpx's own pass through).

    As with httpx's own transport, the request is not attached here: httpx's client
    and its response attach it to every error that comes through them.
    """
    if isinstance(exc, httpx.HTTPError):
        return exc
    if isinstance(exc, TimeoutError):
        return httpx.ReadTimeout("the server sent nothing for too long")
    if isinstance(exc, (OSError, anyio.BrokenResourceError)):
        if connection.received_any:
            return httpx.ReadError(_describe(exc))
        return httpx.RemoteProtocolError(
            f"the connection failed before any reply ({_describe(exc)})"
        )
    return exc
