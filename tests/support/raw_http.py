"""A raw HTTP/1.1 server on 127.0.0.1 that answers exactly the bytes a test scripts.

Each request is read whole (head, then a Content-Length body) and counted; then the
next scripted answer is sent: bytes (the connection stays open), ``CLOSE`` (close
without answering), ``HANG`` (say nothing), or ``(bytes, CLOSE)``.
"""

from __future__ import annotations

import inspect
import re
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
from anyio.streams.tls import TLSListener

CLOSE = "close"
HANG = "hang"

Handler = Callable[[bytes, anyio.abc.ByteStream], Awaitable[None]]
"""An answer that writes for itself (``async def answer(request, stream)``), for replies
that must wait for the test between their parts."""

Answer = bytes | str | tuple[bytes, str] | Callable[[bytes], bytes] | Handler


@dataclass
class RawServer:
    """What the server saw."""

    port: int = 0
    scheme: str = "http"
    host: str = "127.0.0.1"
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    open_now: int = 0
    most_open: int = 0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def paths(self) -> list[str]:
        return [r.split(b" ", 2)[1].decode() for r in self.requests]


_LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)", re.IGNORECASE)


async def _read_request(stream: anyio.abc.ByteStream, buffer: bytearray) -> bytes | None:
    while b"\r\n\r\n" not in buffer:
        try:
            buffer += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return None
    end = buffer.index(b"\r\n\r\n") + 4
    match = _LENGTH.search(bytes(buffer[:end]))
    total = end + (int(match.group(1)) if match else 0)
    while len(buffer) < total:
        try:
            buffer += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return None
    request = bytes(buffer[:total])
    del buffer[:total]
    return request


@asynccontextmanager
async def raw_server(
    answers: Sequence[Answer],
    *,
    tls: ssl.SSLContext | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> AsyncIterator[RawServer]:
    """Serve ``answers`` in order, over any number of connections, on ``host`` (and
    ``port``, a free one by default)."""
    queue = list(answers)
    server = RawServer(scheme="https" if tls else "http", host=host)

    async def handle(stream: anyio.abc.ByteStream) -> None:
        server.connections += 1
        server.open_now += 1
        server.most_open = max(server.most_open, server.open_now)
        buffer = bytearray()
        try:
            async with stream:
                while True:
                    request = await _read_request(stream, buffer)
                    if request is None:
                        return
                    server.requests.append(request)
                    answer = queue.pop(0) if queue else CLOSE
                    if inspect.iscoroutinefunction(answer):
                        await answer(request, stream)
                        continue
                    if callable(answer):
                        answer = answer(request)
                    close = False
                    if isinstance(answer, tuple):
                        answer, close = answer[0], True
                    if answer == CLOSE:
                        return
                    if answer == HANG:
                        await anyio.sleep_forever()
                    assert isinstance(answer, bytes)
                    await stream.send(answer)
                    if close:
                        return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ssl.SSLError, OSError):
            return
        finally:
            server.open_now -= 1

    listener: anyio.abc.Listener[anyio.abc.ByteStream] = await anyio.create_tcp_listener(
        local_host=host, local_port=port
    )
    server.port = listener.extra(anyio.abc.SocketAttribute.local_port)
    if tls is not None:
        listener = TLSListener(listener, tls, standard_compatible=False)
    async with anyio.create_task_group() as group:
        group.start_soon(listener.serve, handle)
        try:
            yield server
        finally:
            group.cancel_scope.cancel()
    await listener.aclose()


def ok(body: bytes = b"ok", *, extra: bytes = b"") -> bytes:
    """A plain 200 with a Content-Length."""
    return b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (extra, len(body), body)


def chunked(*chunks: bytes) -> bytes:
    """A 200 whose body comes in these chunks."""
    framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + framed + b"0\r\n\r\n"


def self_signed_certificate(where: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and .2) and its key, made by the openssl command."""
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1,IP:127.0.0.2"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def tls_server_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    """What a raw_server needs to speak https (HTTP/1.1 offered by ALPN) with that certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    context.set_alpn_protocols(["http/1.1"])
    return context
