"""One HTTP/1.1 connection: a socket (plain or TLS) and llhttp's parser of its replies.

All parsing of HTTP is llhttp's, through httptools. Two leniencies are switched on,
both of which h11 (httpx's own parser) also accepts from a server: header lines
folded over several lines (obs-fold, unfolded here) and lines ending in LF alone.
Spaces after a chunk's size are accepted too, as h11 does. What this module decides
itself is only what llhttp leaves to its caller: that a
reply with neither ``Content-Length`` nor chunked framing ends when the server closes.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections import deque
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import httptools
import httpx
from anyio.abc import SocketAttribute

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["BadHTTPError", "Connection", "NoReplyError"]

_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)  # the socket is non-blocking anyway
READ_SIZE = 65536
MAX_HEAD = 65536


class BadHTTPError(httpx.RemoteProtocolError):
    """The server answered something that is not valid HTTP/1.1."""


class NoReplyError(httpx.RemoteProtocolError):
    """The server closed the connection without sending a byte of a reply."""


class Connection:
    """A socket to one server, reused for one request after another."""

    __slots__ = (
        "_body",
        "_closed",
        "_complete",
        "_error",
        "_head_size",
        "_headers",
        "_headers_done",
        "_keep_alive",
        "_parser",
        "_raw",
        "_status",
        "_version",
        "idle_since",
        "received_any",
        "stream",
    )

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.idle_since = time.monotonic()
        self._raw: socket.socket | None = stream.extra(SocketAttribute.raw_socket, None)
        self._closed = False
        self._reset()

    def _reset(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._parser.set_dangerous_leniencies(
            lenient_headers=True,
            lenient_optional_cr_before_lf=True,
            lenient_spaces_after_chunk_size=True,
        )
        self._headers: list[tuple[bytes, bytes]] = []
        self._headers_done = False
        self._complete = False
        self._keep_alive = False
        self._status = 0
        self._version = "1.1"
        self._body: deque[bytes] = deque()
        self._head_size = 0
        self._error: BadHTTPError | None = None
        self.received_any = False

    # -- llhttp's callbacks --------------------------------------------------------

    def on_message_begin(self) -> None:
        # Also after an informational (1xx) reply: what counts is the final one.
        self._headers = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            return
        self._status = status
        self._version = self._parser.get_http_version()
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._headers_done:
            self._complete = True
            self._keep_alive = self._parser.should_keep_alive()

    # -- used by the transport -------------------------------------------------------

    def is_reusable(self, expiry: float) -> bool:
        """Whether an idle connection can carry another request.

        An idle HTTP/1.1 connection has nothing to read. Peeking at the socket (not
        ``select``, which fails past 1,024 descriptors) tells whether the server closed
        it or sent stray bytes; either way a request on it could be lost.
        """
        if self._closed or time.monotonic() - self.idle_since > expiry:
            return False
        raw = self._raw
        if raw is None:
            return True
        # asyncio hands out a wrapper without recv(): peek through the descriptor.
        peek = socket.socket(fileno=raw.fileno())
        try:
            peek.recv(1, socket.MSG_PEEK | _DONTWAIT)
        except BlockingIOError:
            return True  # nothing to read: the server still holds it open
        except OSError:
            return False
        finally:
            peek.detach()
        return False  # readable at all: closed by the server (b"") or stray bytes

    async def send(self, data: Sequence[bytes], timeout: float | None) -> None:
        """Write the request in one write: head and body in separate segments would let
        Nagle's algorithm and the server's delayed ACK hold the body back (40 ms)."""
        with anyio.fail_after(timeout):
            await self.stream.send(b"".join(data))

    async def _receive(self, timeout: float | None) -> bytes:
        """The next bytes from the server; ``b""`` when it closed the connection."""
        try:
            with anyio.fail_after(timeout):
                return await self.stream.receive(READ_SIZE)
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return b""

    def _feed(self, data: bytes) -> None:
        self.received_any = True
        if not self._headers_done:
            self._head_size += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            raise BadHTTPError("the server switched protocols, which ollm does not do") from None
        except httptools.HttpParserError as exc:
            if self._complete:
                # Bytes after the reply ended: it is whole, but the connection is not clean.
                self._keep_alive = False
                return
            if self._headers_done:
                # The body llhttp gave before the bad bytes (whole chunks) is the reply's:
                # it is read first, then the error (as h11 does).
                self._error = BadHTTPError(f"{exc}")
                return
            raise BadHTTPError(f"{exc}") from None
        if not self._headers_done and self._head_size > MAX_HEAD:
            raise BadHTTPError(f"the reply's head is longer than {MAX_HEAD} bytes")

    async def read_head(
        self, timeout: float | None, *, head_only: bool = False
    ) -> tuple[int, str, list[tuple[bytes, bytes]]]:
        """Read until the final reply's head: its status, HTTP version and headers."""
        while not self._headers_done:
            data = await self._receive(timeout)
            if not data:
                if self.received_any:
                    raise BadHTTPError(
                        "the server closed the connection in the middle of its reply"
                    )
                raise NoReplyError("Server disconnected without sending a response.")
            self._feed(data)
        # llhttp never gives a value a CR or LF (a lone CR is refused, LF ends the line,
        # folded lines are joined), but it lets NUL through under lenient_headers.
        for _name, value in self._headers:
            if b"\0" in value:
                raise BadHTTPError("a header value holds a NUL character")
        if head_only:
            self._complete = True
            self._keep_alive = False
            self._body.clear()
        return self._status, self._version, self._headers

    def _ends_at_close(self) -> bool:
        """A reply without framing: its body is whatever comes until the server closes."""
        for name, value in self._headers:
            lowered = name.lower()
            if lowered == b"content-length":
                return False
            if lowered == b"transfer-encoding" and b"chunked" in value.lower():
                return False
        return True

    async def read_body(self, timeout: float | None) -> bytes | None:
        """The next block of the body; ``None`` at its end."""
        while True:
            body = self._body
            if body:
                if len(body) == 1:
                    return body.popleft()
                joined = b"".join(body)
                body.clear()
                return joined
            if self._complete:
                return None
            if self._error is not None:
                raise self._error
            data = await self._receive(timeout)
            if not data:
                if self._ends_at_close():
                    self._complete = True
                    self._keep_alive = False
                    return None
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            self._feed(data)

    @property
    def complete(self) -> bool:
        """Whether the reply was read to its end."""
        return self._complete and not self._body

    def finish(self) -> bool:
        """After a reply: whether the connection can serve another one (and reset it)."""
        reusable = self._complete and self._keep_alive and not self._body and not self._closed
        if reusable:
            self.idle_since = time.monotonic()
            self._reset()
        return reusable

    async def aclose(self) -> None:
        """Close the socket at once (never waits for a TLS goodbye from the server)."""
        if self._closed:
            return
        self._closed = True
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(1.0),
            contextlib.suppress(Exception),  # closing a broken socket
        ):
            await self.stream.aclose()
