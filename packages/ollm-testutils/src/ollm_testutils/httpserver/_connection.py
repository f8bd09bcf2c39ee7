"""One HTTP/1.1 connection on a raw socket: parsing requests, writing responses.

Written for the fake Ollama server, where a test needs what a framework hides: writing
any bytes (a malformed line, half a chunk), closing a connection in the middle of a
body, and noticing that the client went away while the server waits. Nothing here
knows about Ollama.
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import time
import zlib
from collections.abc import Iterable
from email.utils import formatdate
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

__all__ = ["BadRequest", "Connection", "HttpRequest", "Response", "Waker", "json_error", "readable"]

log = logging.getLogger(__name__)

_MAX_HEADER_BYTES = 1 << 20
_MAX_BODY_BYTES = 1 << 30
_RECV = 1 << 16


class HttpRequest:
    """One parsed request."""

    __slots__ = ("body", "headers", "method", "path", "query", "target", "version")

    def __init__(
        self,
        method: str,
        target: str,
        version: str,
        headers: dict[str, str],
        body: bytes,
    ) -> None:
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.body = body
        path, _, query = target.partition("?")
        self.path = unquote(path)
        self.query = query

    @property
    def keep_alive(self) -> bool:
        """Whether the client wants the connection kept open after the response."""
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection


class BadRequest(Exception):
    """The client sent something that is not HTTP/1.1."""


class Waker:
    """A socket that becomes readable, for every waiter at once, when the server stops."""

    def __init__(self) -> None:
        self.reader, self._writer = socket.socketpair()

    def wake(self) -> None:
        """Wake every waiter (the byte is never read, so they all see it)."""
        with contextlib.suppress(OSError):
            self._writer.send(b"x")

    def close(self) -> None:
        """Release both sockets."""
        for sock in (self.reader, self._writer):
            with contextlib.suppress(OSError):
                sock.close()


class Connection:
    """One client connection: reading requests, writing bytes, waiting watchfully."""

    def __init__(self, sock: socket.socket, waker: Waker) -> None:
        self.sock = sock
        self.waker = waker
        self.buffer = bytearray()
        self.closed = False
        self.disconnected = False

    def read_request(self) -> HttpRequest | None:
        """The next request, or ``None`` when the client closed the connection."""
        end = self.buffer.find(b"\r\n\r\n")
        while end < 0:
            if len(self.buffer) > _MAX_HEADER_BYTES:
                raise BadRequest("request headers too large")
            if not self._fill():
                if self.buffer.strip():
                    raise BadRequest("connection closed in the middle of a request")
                return None
            end = self.buffer.find(b"\r\n\r\n")
        head = bytes(self.buffer[:end]).decode("latin-1")
        del self.buffer[: end + 4]
        lines = head.split("\r\n")
        while lines and not lines[0]:
            lines.pop(0)  # stray CRLF between requests (RFC 9112 allows skipping it)
        if not lines:
            raise BadRequest("empty request")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise BadRequest(f"malformed request line {lines[0]!r}")
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise BadRequest(f"malformed header line {line!r}")
            key = name.lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = self._read_chunked()
        else:
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                raise BadRequest("invalid Content-Length") from None
            if length < 0 or length > _MAX_BODY_BYTES:
                raise BadRequest("invalid Content-Length")
            body = self._read_exact(length)
        return HttpRequest(method, target, version, headers, body)

    def _fill(self) -> bool:
        try:
            data = self.sock.recv(_RECV)
        except OSError:
            data = b""
        if not data:
            return False
        self.buffer += data
        return True

    def _read_exact(self, length: int) -> bytes:
        while len(self.buffer) < length:
            if not self._fill():
                raise BadRequest("connection closed in the middle of a request body")
        data = bytes(self.buffer[:length])
        del self.buffer[:length]
        return data

    def _read_line(self) -> bytes:
        end = self.buffer.find(b"\r\n")
        while end < 0:
            if len(self.buffer) > _MAX_HEADER_BYTES or not self._fill():
                raise BadRequest("malformed chunked body")
            end = self.buffer.find(b"\r\n")
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 2]
        return line

    def _read_chunked(self) -> bytes:
        body = bytearray()
        while True:
            size_text = self._read_line().split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise BadRequest("malformed chunk size") from None
            if size == 0:
                while self._read_line():
                    pass  # trailers
                return bytes(body)
            body += self._read_exact(size)
            if len(body) > _MAX_BODY_BYTES:
                raise BadRequest("request body too large")
            if self._read_exact(2) != b"\r\n":
                raise BadRequest("malformed chunked body")

    def send(self, data: bytes) -> bool:
        """Write ``data``; False (and the connection marked gone) if the client left."""
        if self.closed:
            return False
        try:
            self.sock.sendall(data)
        except OSError:
            self.disconnected = True
            self.close()
            return False
        return True

    def wait(self, seconds: float | None) -> bool:
        """Wait ``seconds`` (``None``: until the end); False if the client or server left.

        Watches the socket while waiting, so a client that closes its connection during
        a delay or a hang is noticed at once.
        """
        if self.closed:
            return False
        wake = self.waker.reader
        watch: list[socket.socket] = [self.sock, wake]
        deadline = None if seconds is None else time.monotonic() + max(0.0, seconds)
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return True
            try:
                ready = readable(watch, remaining)
            except (OSError, ValueError):
                self.disconnected = True
                return False
            if wake in ready:
                return False
            if self.sock in ready:
                try:
                    peek = self.sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    peek = b""
                if not peek:
                    self.disconnected = True
                    return False
                # The client sent more (a pipelined request): keep waiting on the clock.
                watch = [wake]

    def close(self) -> None:
        """Close the socket now (an abrupt end, if a response was under way)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()


class Response:
    """Writes one response on a connection: whole, or chunked piece by piece."""

    __slots__ = (
        "_compressor",
        "chunked",
        "compress",
        "connection",
        "finished",
        "head_only",
        "keep_alive",
        "started",
        "status",
    )

    def __init__(
        self,
        connection: Connection,
        *,
        head_only: bool,
        keep_alive: bool,
        compress: str | None = None,
    ) -> None:
        self.connection = connection
        self.head_only = head_only
        self.keep_alive = keep_alive
        self.started = False
        self.finished = False
        self.chunked = False
        self.status: int | None = None
        # "gzip" or "deflate": every body is sent compressed, with its Content-Encoding
        # (whether or not the client asked: as a misbehaving proxy does).
        self.compress = compress
        self._compressor: Any = None

    def _head(self, status: int, headers: list[tuple[str, str]]) -> bytes:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = f"status code {status}"
        lines = [f"HTTP/1.1 {status} {phrase}", f"Date: {formatdate(usegmt=True)}"]
        lines.extend(f"{name}: {value}" for name, value in headers)
        if not self.keep_alive:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def send(
        self,
        status: int,
        body: bytes = b"",
        content_type: str | None = None,
        extra_headers: Iterable[tuple[str, str]] = (),
    ) -> bool:
        """A complete response with a Content-Length (and ``extra_headers``)."""
        headers = list(extra_headers)
        if content_type is not None:
            headers.append(("Content-Type", content_type))
        if self.compress is not None and body:
            packer = _compressor(self.compress)
            body = packer.compress(body) + packer.flush()
            headers.append(("Content-Encoding", self.compress))
        headers.append(("Content-Length", str(len(body))))
        self.started = True
        self.status = status
        data = self._head(status, headers)
        if not self.head_only:
            data += body
        ok = self.connection.send(data)
        self.finished = ok
        return ok

    def start_chunked(self, status: int, content_type: str) -> bool:
        """Send the head of a chunked response."""
        self.started = True
        self.chunked = True
        self.status = status
        headers = [("Content-Type", content_type), ("Transfer-Encoding", "chunked")]
        if self.compress is not None:
            self._compressor = _compressor(self.compress)
            headers.append(("Content-Encoding", self.compress))
        return self.connection.send(self._head(status, headers))

    def write(self, data: bytes) -> bool:
        """One HTTP chunk (nothing for empty data, which would end the body)."""
        if not data or self.head_only:
            return not self.connection.closed
        if self._compressor is not None:
            # Flushed at once, so that each piece reaches the client as it is written.
            data = self._compressor.compress(data) + self._compressor.flush(zlib.Z_SYNC_FLUSH)
        return self.connection.send(b"%x\r\n%b\r\n" % (len(data), data))

    def write_many(self, pieces: list[bytes]) -> bool:
        """Several HTTP chunks in one system call (for bulk bodies)."""
        if self.head_only:
            return not self.connection.closed
        return self.connection.send(
            b"".join(b"%x\r\n%b\r\n" % (len(piece), piece) for piece in pieces if piece)
        )

    def write_framed(self, data: bytes) -> bool:
        """Bytes already framed as HTTP chunks, sent as they are (for bulk bodies)."""
        if not data or self.head_only:
            return not self.connection.closed
        return self.connection.send(data)

    def end(self) -> bool:
        """The last chunk: the body is complete."""
        if self._compressor is not None and not self.head_only:
            rest = self._compressor.flush()
            if rest and not self.connection.send(b"%x\r\n%b\r\n" % (len(rest), rest)):
                return False
        ok = self.connection.send(b"0\r\n\r\n") if not self.head_only else True
        self.finished = ok
        return ok

    def abort(self) -> None:
        """Close the connection in the middle of the response."""
        self.connection.close()


def _compressor(encoding: str) -> Any:
    """A zlib stream writing ``gzip`` or ``deflate`` (zlib-wrapped, as RFC 9110 says)."""
    if encoding not in ("gzip", "deflate"):
        raise ValueError(f"compress must be 'gzip' or 'deflate', not {encoding!r}")
    return zlib.compressobj(wbits=31 if encoding == "gzip" else 15)


def json_error(message: str) -> bytes:
    """``{"error": message}`` as bytes."""
    return json.dumps({"error": message}).encode()


def readable(sockets: list[socket.socket], timeout: float | None) -> list[socket.socket]:
    """The sockets ready to read (or closed) within ``timeout`` seconds.

    ``poll`` where there is one: ``select`` fails on descriptors above 1023, which a
    large test session reaches.
    """
    if not hasattr(select, "poll"):
        readable, _, _ = select.select(sockets, [], [], timeout)
        return list(readable)
    poller = select.poll()
    by_fd = {}
    for sock in sockets:
        poller.register(sock, select.POLLIN | select.POLLPRI)
        by_fd[sock.fileno()] = sock
    wait_ms = None if timeout is None else max(0, int(timeout * 1000) + 1)
    return [by_fd[fd] for fd, _ in poller.poll(wait_ms) if fd in by_fd]
