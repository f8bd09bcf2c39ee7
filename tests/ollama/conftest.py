"""Fixtures of the Ollama provider's tests: a mocked server (pytest-httpx) and a raw one.

- ``ollama_mock``: ``httpx_mock`` with ``GET /api/ps`` saying the test models are
  loaded, so a chat goes straight to ``/api/chat`` (no loading notice);
- ``reply``: queue one ``/api/chat`` answer made of NDJSON lines;
- ``provider``: an ``OllamaProvider`` for ``HOST`` with an empty environment;
- ``chat``: run one request through ``chat_stream`` and return its events;
- ``sent``: the JSON bodies the provider sent to ``/api/chat``;
- ``raw_server``: a real HTTP/1.1 server on 127.0.0.1, scripted per route, that sees
  when the client closes its connection (for abort, close and timeout tests);
- ``closed_port``: the URL of a port on 127.0.0.1 where nothing listens.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from pytest_httpx import HTTPXMock, IteratorStream

import ollm
from ollm_http import RetryPolicy
from ollm_ollama import OllamaProvider

HOST = "http://127.0.0.1:11434"
LOADED = ["llama3.2:latest", "qwen3:latest", "m:latest", "gemma3:latest", "llama9:latest"]

Line = dict[str, Any] | bytes
AddReply = Callable[..., None]
RunChat = Callable[..., Awaitable[list[ollm.ProviderEvent]]]


def ndjson(lines: list[Line], *, newline_at_end: bool = True) -> bytes:
    """Lines as Ollama streams them (bytes are sent as they are)."""
    out = b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines
    )
    return out if newline_at_end else out[:-1]


def _chunk(
    content: str = "",
    *,
    thinking: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    done: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """One ``/api/chat`` chunk as a real server writes it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        message["thinking"] = thinking
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    line: dict[str, Any] = {
        "model": "llama3.2",
        "created_at": "2025-07-07T20:22:19.184789Z",
        "message": message,
        "done": done,
    }
    line.update(extra)
    return line


def _final(content: str = "", **extra: Any) -> dict[str, Any]:
    """The ``done:true`` chunk, with metrics."""
    fields: dict[str, Any] = {
        "done_reason": "stop",
        "total_duration": 4883583458,
        "load_duration": 1334875,
        "prompt_eval_count": 26,
        "prompt_eval_duration": 342546000,
        "eval_count": 282,
        "eval_duration": 4535599000,
    }
    fields.update(extra)
    return _chunk(content, done=True, **fields)


@pytest.fixture
def chunk() -> Callable[..., dict[str, Any]]:
    """``chunk(content, thinking=..., tool_calls=..., done=..., **fields)``."""
    return _chunk


@pytest.fixture
def final() -> Callable[..., dict[str, Any]]:
    """``final(content, **fields)``: the last chunk, with metrics."""
    return _final


@pytest.fixture
def ollama_mock(httpx_mock: HTTPXMock) -> HTTPXMock:
    """``httpx_mock`` where ``/api/ps`` reports the test models as loaded."""
    httpx_mock.add_response(
        method="GET",
        url=f"{HOST}/api/ps",
        json={"models": [{"name": n, "model": n, "context_length": 8192} for n in LOADED]},
        is_optional=True,
        is_reusable=True,
    )
    return httpx_mock


@pytest.fixture
def reply(ollama_mock: HTTPXMock) -> AddReply:
    """Queue one ``/api/chat`` answer: ``reply(*lines, status=200, pieces=None, ...)``.

    ``pieces`` cuts the body into reads of that many bytes (lines then straddle reads);
    ``newline_at_end=False`` leaves the last line without ``\\n``; ``body`` sends raw
    bytes instead of lines.
    """

    def add(
        *lines: Line,
        status: int = 200,
        pieces: int | None = None,
        newline_at_end: bool = True,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = body if body is not None else ndjson(list(lines), newline_at_end=newline_at_end)
        if pieces:
            parts = [data[i : i + pieces] for i in range(0, len(data), pieces)]
        else:
            parts = [ln + b"\n" for ln in data.split(b"\n")[:-1]] + (
                [data.rsplit(b"\n", 1)[-1]] if not data.endswith(b"\n") else []
            )
        kind = "application/x-ndjson" if status == 200 else "application/json; charset=utf-8"
        ollama_mock.add_response(
            method="POST",
            url=f"{HOST}/api/chat",
            status_code=status,
            headers={"Content-Type": kind, **(headers or {})},
            stream=IteratorStream(parts),
        )

    return add


@pytest.fixture
async def provider() -> AsyncIterator[OllamaProvider]:
    """An ``OllamaProvider`` for ``HOST``, configured from nothing but its defaults."""
    # httpx_mock replaces httpx's own transport: these tests use that stack.
    # Transient failures are tried again at once (the policy's waits are its own tests').
    async with OllamaProvider(
        HOST, http="httpx", retry=RetryPolicy(backoff=0), environ={}
    ) as built:
        yield built


def make_request(
    prompt: str | ollm.ProviderRequest = "Hello", **fields: Any
) -> ollm.ProviderRequest:
    """A request for ``llama3.2`` with one user message (or ``prompt`` itself)."""
    if isinstance(prompt, ollm.ProviderRequest):
        return prompt
    fields.setdefault("model", "llama3.2")
    fields.setdefault("messages", (ollm.Message.user(prompt),))
    return ollm.ProviderRequest(**fields)


@pytest.fixture
def request_for() -> Callable[..., ollm.ProviderRequest]:
    """``request_for(prompt="Hello", **ProviderRequest fields)``: a request for llama3.2."""
    return make_request


async def collect(
    provider: OllamaProvider, request: ollm.ProviderRequest
) -> list[ollm.ProviderEvent]:
    return [event async for event in provider.chat_stream(request)]


@pytest.fixture
def chat(provider: OllamaProvider) -> RunChat:
    """``await chat(prompt_or_request, **fields)``: the events of one reply."""

    async def run(prompt: str | ollm.ProviderRequest = "Hello", **fields: Any) -> list[Any]:
        return await collect(provider, make_request(prompt, **fields))

    return run


@pytest.fixture
def sent(httpx_mock: HTTPXMock) -> Callable[[], list[dict[str, Any]]]:
    """The JSON bodies sent to ``/api/chat`` so far."""

    def bodies() -> list[dict[str, Any]]:
        return [
            json.loads(r.content)
            for r in httpx_mock.get_requests(method="POST", url=f"{HOST}/api/chat")
        ]

    return bodies


# -- a real server on 127.0.0.1 --------------------------------------------------------

Handler = Callable[["RawConnection", "RawRequest"], bool | None]


class RawRequest:
    """One HTTP request as the raw server read it."""

    def __init__(self, line: str, headers: dict[str, str], body: bytes) -> None:
        self.line = line
        self.method, self.target, _ = ([*line.split(" ", 2), "", ""])[:3]
        self.path = self.target.split("?", 1)[0]
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


class RawConnection:
    """One accepted connection; handlers write replies through it."""

    def __init__(self, sock: socket.socket, server: RawServer) -> None:
        self.sock = sock
        self.server = server
        self._buffer = b""

    def read_request(self) -> RawRequest | None:
        while b"\r\n\r\n" not in self._buffer:
            data = self._recv()
            if not data:
                return None
            self._buffer += data
        head, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        while len(self._buffer) < length:
            data = self._recv()
            if not data:
                return None
            self._buffer += data
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        return RawRequest(lines[0], headers, body)

    def _recv(self) -> bytes:
        try:
            return self.sock.recv(65536)
        except OSError:
            return b""

    def send(self, data: bytes) -> bool:
        """Send ``data``; ``False`` once the client has gone."""
        try:
            self.sock.sendall(data)
        except OSError:
            self.server.client_closed.set()
            return False
        return True

    def respond(
        self, status: int, body: bytes = b"", content_type: str = "application/json"
    ) -> None:
        reason = {200: "OK", 403: "Forbidden", 404: "Not Found", 500: "Internal Server Error"}
        head = (
            f"HTTP/1.1 {status} {reason.get(status, 'Status')}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.send(head.encode() + body)

    def start_stream(self) -> None:
        self.send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )

    def send_chunk(self, data: bytes) -> bool:
        return self.send(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self) -> None:
        self.send(b"0\r\n\r\n")

    def gone(self, wait: float) -> bool:
        """Wait up to ``wait`` s for the client to close; ``True`` if it did."""
        try:
            readable, _, _ = select.select([self.sock], [], [], wait)
            if readable and not self.sock.recv(65536, socket.MSG_PEEK):
                self.server.client_closed.set()
                return True
        except OSError:
            self.server.client_closed.set()
            return True
        return False

    def stream_until_closed(self, line: bytes, *, limit: float = 30.0) -> None:
        """Send ``line`` every few ms until the client closes (or ``limit`` s pass)."""
        self.start_stream()
        waited = 0.0
        while waited < limit and not self.server.stopping.is_set():
            if not self.send_chunk(line) or self.gone(0.005):
                return
            waited += 0.005


class RawServer:
    """An HTTP/1.1 server on 127.0.0.1: each route has a handler; one thread per connection.

    ``/api/ps`` answers by default that ``LOADED`` models are loaded. A handler returns
    ``True`` to close the connection after it. ``client_closed`` is set when the
    client is seen closing a connection while a handler streams.
    """

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.routes: dict[str, Handler] = {"/api/ps": _loaded}
        self.requests: list[RawRequest] = []
        self.client_closed = threading.Event()
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                sock, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(sock)
            worker = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            worker.start()
            self._threads.append(worker)

    def _serve(self, sock: socket.socket) -> None:
        conn = RawConnection(sock, self)
        try:
            while not self.stopping.is_set():
                request = conn.read_request()
                if request is None:
                    return
                self.requests.append(request)
                handler = self.routes.get(request.path)
                if handler is None:
                    conn.respond(404, b"404 page not found", "text/plain")
                    continue
                if handler(conn, request):
                    return
        finally:
            with contextlib.suppress(OSError):
                sock.close()

    def close(self) -> None:
        self.stopping.set()
        with contextlib.suppress(OSError):
            # shutdown() wakes the thread blocked in accept(); close() alone does not.
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        for sock in list(self._conns):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=5)


def _loaded(conn: RawConnection, request: RawRequest) -> None:
    body = json.dumps({"models": [{"name": n, "model": n} for n in LOADED]}).encode()
    conn.respond(200, body)


@pytest.fixture
def raw_server() -> Iterator[RawServer]:
    """A real HTTP/1.1 server on 127.0.0.1 (see ``RawServer``)."""
    server = RawServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def closed_port() -> str:
    """The URL of a port on 127.0.0.1 where nothing listens: connecting is refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture(params=["builtin", "httpx"])
def http_stack(request: pytest.FixtureRequest) -> str:
    """Real-server tests run on ollm's own HTTP/1.1 transport and on httpx's stack."""
    return str(request.param)
