"""The fake server's HTTP/1.1 on raw sockets: framing, keep-alive, pipelining, counts."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from ollm_testutils.fake_ollama import FakeOllamaServer, OllamaReply

CHAT = json.dumps({"model": "llama3.2", "messages": [{"role": "user", "content": "hi"}]}).encode()


def post(path: str, body: bytes, extra: bytes = b"") -> bytes:
    return (
        b"POST %b HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n%b\r\n%b" % (path.encode(), len(body), extra, body)
    )


class RawReader:
    """Reads HTTP/1.1 responses off a socket, keeping any extra bytes for the next one."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> None:
        data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError("connection closed")
        self.buffer += data

    def _take_until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(marker)
        return head

    def _take(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def response(self, *, head_only: bool = False) -> tuple[int, dict[str, str], list[bytes]]:
        """Status, headers, and the body as its HTTP chunks (one piece if not chunked)."""
        head = self._take_until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        status = int(head[0].split(" ")[1])
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:])}
        if head_only:
            return status, headers, []
        if headers.get("transfer-encoding") == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self._take_until(b"\r\n"), 16)
                if size == 0:
                    self._take(2)
                    return status, headers, chunks
                chunks.append(self._take(size))
                assert self._take(2) == b"\r\n"
        return status, headers, [self._take(int(headers.get("content-length", "0")))]


@pytest.fixture
def sock(server: FakeOllamaServer) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", server.port)) as connection:
        connection.settimeout(10)
        yield connection


def test_every_ndjson_line_is_its_own_http_chunk(
    server: FakeOllamaServer, sock: socket.socket
) -> None:
    server.script(OllamaReply(["a", "b", "c"]))
    sock.sendall(post("/api/chat", CHAT))
    status, headers, chunks = RawReader(sock).response()
    assert status == 200
    assert headers["transfer-encoding"] == "chunked"
    assert "content-length" not in headers
    assert len(chunks) == 4
    assert all(chunk.endswith(b"\n") and chunk.count(b"\n") == 1 for chunk in chunks)
    assert [json.loads(c)["message"]["content"] for c in chunks] == ["a", "b", "c", ""]


def test_pipelined_requests_are_answered_in_order(
    server: FakeOllamaServer, sock: socket.socket
) -> None:
    server.script("one", "two")
    sock.sendall(post("/api/chat", CHAT) + post("/api/chat", CHAT) + b"GET / HTTP/1.1\r\n\r\n")
    reader = RawReader(sock)
    first, second, third = reader.response(), reader.response(), reader.response()
    assert json.loads(first[2][0])["message"]["content"] == "one"
    assert json.loads(second[2][0])["message"]["content"] == "two"
    assert third[2] == [b"Ollama is running"]
    assert server.connections_accepted == 1


def test_connection_close_is_honoured(server: FakeOllamaServer, sock: socket.socket) -> None:
    sock.sendall(b"GET /api/version HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    reader = RawReader(sock)
    status, headers, _ = reader.response()
    assert status == 200
    assert headers["connection"] == "close"
    with pytest.raises(EOFError):
        reader._fill()


def test_http_1_0_closes_after_the_response(sock: socket.socket) -> None:
    sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
    reader = RawReader(sock)
    assert reader.response()[2] == [b"Ollama is running"]
    with pytest.raises(EOFError):
        reader._fill()


def test_a_malformed_request_gets_400_and_a_close(sock: socket.socket) -> None:
    sock.sendall(b"NONSENSE\r\n\r\n")
    reader = RawReader(sock)
    status, _, body = reader.response()
    assert status == 400
    assert b"malformed request line" in body[0]
    with pytest.raises(EOFError):
        reader._fill()


def test_a_chunked_request_body_is_read(server: FakeOllamaServer, sock: socket.socket) -> None:
    half = len(CHAT) // 2
    sock.sendall(
        b"POST /api/chat HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"%x\r\n%b\r\n%x\r\n%b\r\n0\r\n\r\n" % (half, CHAT[:half], len(CHAT) - half, CHAT[half:])
    )
    status, _, _ = RawReader(sock).response()
    assert status == 200
    assert server.chat_requests[0].json["model"] == "llama3.2"


def test_head_sends_headers_only(sock: socket.socket) -> None:
    sock.sendall(b"HEAD / HTTP/1.1\r\nHost: localhost\r\n\r\nGET /api/version HTTP/1.1\r\n\r\n")
    reader = RawReader(sock)
    status, headers, _ = reader.response(head_only=True)
    assert status == 200
    assert headers["content-length"] == "17"
    # No body bytes follow: the next response starts right away.
    assert json.loads(reader.response()[2][0]) == {"version": "0.33.0-rc2"}


def test_open_connections_are_counted(server: FakeOllamaServer) -> None:
    sockets = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
    assert _eventually(lambda: server.open_connections == 3)
    for connection in sockets:
        connection.close()
    assert _eventually(lambda: server.open_connections == 0)
    assert server.connections_accepted == 3


def _eventually(condition: object, timeout: float = 10.0) -> bool:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return bool(condition())


def test_the_bulk_reply_reaches_a_plain_reader_whole(
    server: FakeOllamaServer, sock: socket.socket, record_property: object
) -> None:
    """100k chunks through a plain socket reader; the rate is recorded, not asserted."""
    server.default_reply = OllamaReply.streamed(100_000, "tok ")
    sock.sendall(post("/api/chat", CHAT))  # builds and caches the body
    RawReader(sock).response()
    started = time.perf_counter()
    sock.sendall(post("/api/chat", CHAT))
    _, _, chunks = RawReader(sock).response()
    elapsed = time.perf_counter() - started
    body = b"".join(chunks)
    assert body.count(b"\n") == 100_001
    assert json.loads(body.rsplit(b"\n", 2)[-2])["eval_count"] == 100_000
    assert callable(record_property)
    record_property("ndjson_chunks_per_second", round(100_000 / elapsed))
    record_property("megabytes_per_second", round(len(body) / elapsed / 1e6, 1))
