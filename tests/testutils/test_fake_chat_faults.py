"""FakeOllamaServer's /api/chat faults, chunk boundaries, disconnections, async clients."""

from __future__ import annotations

import json
import socket

import anyio
import httpx
import pytest
from fake_chat_helpers import chat_body, lines_of
from hypothesis import given
from hypothesis import strategies as st

from ollm_testutils.fake_ollama import FakeOllamaServer, OllamaReply

# -- faults -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "status", "body"),
    [
        (OllamaReply.http_error(500, "boom"), 500, b'{"error":"boom"}'),
        (
            OllamaReply.server_busy(),
            503,
            b'{"error":"server busy, please try again.  maximum pending requests exceeded"}',
        ),
        (OllamaReply.forbidden(), 403, b""),
        (
            OllamaReply.http_error(404, "model 'x' not found"),
            404,
            b'{"error":"model \'x\' not found"}',
        ),
        (
            OllamaReply(status=502, body="<html>bad gateway</html>"),
            502,
            b"<html>bad gateway</html>",
        ),
    ],
)
@pytest.mark.parametrize("stream", [True, False])
def test_errors_before_the_first_byte(
    server: FakeOllamaServer,
    client: httpx.Client,
    reply: OllamaReply,
    status: int,
    body: bytes,
    stream: bool,
) -> None:
    server.script(reply)
    response = client.post("/api/chat", json=chat_body(stream=stream))
    assert response.status_code == status
    assert response.content == body
    assert response.headers["content-length"] == str(len(body))


def test_an_error_line_in_the_middle_of_the_stream(
    server: FakeOllamaServer, client: httpx.Client
) -> None:
    server.script(OllamaReply.midstream_error(["The", " sky"], "runner crashed"))
    response = client.post("/api/chat", json=chat_body())
    assert response.status_code == 200
    chunks = lines_of(response)
    assert [c.get("message", {}).get("content") for c in chunks[:2]] == ["The", " sky"]
    assert chunks[-1] == {"error": "runner crashed"}
    # With stream:false the same failure is a 500.
    server.script(OllamaReply.midstream_error(["The"], "runner crashed"))
    whole = client.post("/api/chat", json=chat_body(stream=False))
    assert (whole.status_code, whole.json()) == (500, {"error": "runner crashed"})


def test_connection_closed_before_done(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.script(OllamaReply.disconnect(["The", " sky"]))
    received: list[str] = []

    def read() -> None:
        with client.stream("POST", "/api/chat", json=chat_body()) as response:
            for line in response.iter_lines():
                received.append(json.loads(line)["message"]["content"])

    with pytest.raises(httpx.RemoteProtocolError):
        read()
    assert received == ["The", " sky"]
    assert server.chat_requests[0].wait()
    assert server.chat_requests[0].completed is False
    # Without streaming the client just sees the connection go.
    server.script(OllamaReply.disconnect())
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/api/chat", json=chat_body(stream=False))


def test_a_clean_end_without_done(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.script(OllamaReply(["a", "b"], end="eof"))
    chunks = lines_of(client.post("/api/chat", json=chat_body()))
    assert [c["done"] for c in chunks] == [False, False]


def test_a_malformed_line(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.script(OllamaReply(["a", "b"], malformed='{"model":"llama3.2","crea', malformed_at=1))
    raw = client.post("/api/chat", json=chat_body()).text.splitlines()
    assert raw[1] == '{"model":"llama3.2","crea'
    assert json.loads(raw[0])["message"]["content"] == "a"
    assert json.loads(raw[-1])["done"] is True


def test_a_huge_line(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.script(OllamaReply("end", huge_chunk=3_000_000))
    chunks = lines_of(client.post("/api/chat", json=chat_body()))
    assert len(chunks[0]["message"]["content"]) == 3_000_000
    assert chunks[1]["message"]["content"] == "end"


def test_raw_lines_replace_the_body(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.script(OllamaReply(lines=['{"done":true}', b"not json"]))
    assert client.post("/api/chat", json=chat_body()).text == '{"done":true}\nnot json\n'


@st.composite
def text_chunks(draw: st.DrawFn) -> list[str]:
    return draw(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=8))


@given(chunks=text_chunks(), write_size=st.integers(min_value=1, max_value=97))
def test_lines_survive_any_http_chunk_boundaries(
    server: FakeOllamaServer, client: httpx.Client, chunks: list[str], write_size: int
) -> None:
    """Cut anywhere (inside a line, inside a UTF-8 character), the NDJSON is the same."""
    server.script(OllamaReply(chunks, write_size=write_size))
    with client.stream("POST", "/api/chat", json=chat_body()) as response:
        pieces = list(response.iter_raw())
        lines = [json.loads(line) for line in b"".join(pieces).split(b"\n") if line]
    assert [c["message"]["content"] for c in lines[:-1]] == chunks
    assert lines[-1]["done"] is True


def test_strings_are_escaped_as_go_escapes_them(
    server: FakeOllamaServer, client: httpx.Client
) -> None:
    server.script(OllamaReply("<a & b>\u2028\u2029\x85"))
    first = client.post("/api/chat", json=chat_body()).content.split(b"\n")[0]
    assert b'"content":"\\u003ca \\u0026 b\\u003e\\u2028\\u2029\xc2\x85"' in first
    assert json.loads(first)["message"]["content"] == "<a & b>\u2028\u2029\x85"


def test_write_size_really_cuts_the_body() -> None:
    """On a raw socket, the body arrives as HTTP chunks of exactly write_size bytes."""
    with FakeOllamaServer() as server:
        server.script(OllamaReply(["é" * 10], write_size=5))
        data = _raw_chat(server)
    _head, _, body = data.partition(b"\r\n\r\n")
    sizes = []
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        sizes.append(size)
        body = body[size + 2 :]
    assert sizes[-1] == 0
    assert set(sizes[:-2]) == {5}
    assert 0 < sizes[-2] <= 5


def _raw_chat(server: FakeOllamaServer) -> bytes:
    payload = json.dumps(chat_body()).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(
            b"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%b" % (len(payload), payload)
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


# -- what the server records, and disconnections ---------------------------------------


def test_requests_are_recorded(server: FakeOllamaServer, client: httpx.Client) -> None:
    client.post("/api/chat", json=chat_body(), headers={"X-Test": "1"})
    client.get("/api/tags")
    assert [(r.method, r.path) for r in server.requests] == [
        ("POST", "/api/chat"),
        ("GET", "/api/tags"),
    ]
    chat = server.chat_requests[0]
    assert chat.json == chat_body()
    assert chat.headers["x-test"] == "1"
    assert chat.headers["content-type"] == "application/json"
    assert chat.status == 200
    assert chat.wait()
    assert chat.completed
    assert not chat.disconnected
    assert server.last_request.path == "/api/tags"


def test_keep_alive_reuses_one_connection(server: FakeOllamaServer, client: httpx.Client) -> None:
    for _ in range(3):
        client.post("/api/chat", json=chat_body())
    assert server.connections_accepted == 1
    assert server.open_connections == 1


def test_closing_a_hanging_stream_is_seen_as_a_disconnect(
    server: FakeOllamaServer, client: httpx.Client
) -> None:
    server.script(OllamaReply.hanging(["partial"]))
    with client.stream("POST", "/api/chat", json=chat_body()) as response:
        # Keep the iterator: dropping it would close the response at once.
        lines = response.iter_lines()
        first = next(lines)
        assert json.loads(first)["message"]["content"] == "partial"
        record = server.chat_requests[0]
        assert not record.finished
    # Leaving the block closes the unfinished response, and with it the connection.
    assert record.wait()
    assert record.disconnected
    assert not record.completed
    assert server.wait_idle()


def test_a_delay_is_cut_short_by_a_disconnect(server: FakeOllamaServer) -> None:
    server.script(OllamaReply("late", first_byte_delay=60.0))
    with httpx.Client(base_url=server.url, timeout=0.2) as http, pytest.raises(httpx.ReadTimeout):
        http.post("/api/chat", json=chat_body())
    assert server.chat_requests[0].wait(10.0)
    assert server.chat_requests[0].disconnected


def test_stopping_the_server_ends_a_hanging_reply() -> None:
    server = FakeOllamaServer().start()
    server.script(OllamaReply.hanging(["x"]))
    with (
        httpx.Client(base_url=server.url) as http,
        http.stream("POST", "/api/chat", json=chat_body()) as response,
    ):
        lines = response.iter_lines()
        next(lines)
        server.stop()
        with pytest.raises(httpx.RemoteProtocolError):
            list(lines)
    assert server.open_connections == 0


def test_server_wide_failures(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.fail(503, "server busy", times=2)
    assert client.get("/api/tags").status_code == 503
    assert client.post("/api/chat", json=chat_body()).json() == {"error": "server busy"}
    assert client.get("/api/tags").status_code == 200
    server.fail(500, "down", path="/api/chat")
    assert client.get("/api/version").status_code == 200
    assert client.post("/api/chat", json=chat_body()).status_code == 500
    server.clear_failures()
    assert client.post("/api/chat", json=chat_body()).status_code == 200
    server.fail(403)
    forbidden = client.get("/")
    assert (forbidden.status_code, forbidden.content) == (403, b"")


def test_the_host_guard(server: FakeOllamaServer, client: httpx.Client) -> None:
    rejected = client.get("/api/tags", headers={"Host": "ollama.example.com"})
    assert (rejected.status_code, rejected.content) == (403, b"")
    for host in ("localhost:11434", "127.0.0.1", "[::1]:80", "10.0.0.4", "box.local", "a.internal"):
        assert client.get("/api/tags", headers={"Host": host}).status_code == 200, host
    server.check_host = False
    assert client.get("/api/tags", headers={"Host": "ollama.example.com"}).status_code == 200


# -- async clients, both backends ----------------------------------------------------------


@pytest.mark.anyio
async def test_async_streaming(server: FakeOllamaServer, aclient: httpx.AsyncClient) -> None:
    server.script(OllamaReply(["a", "b", "c"], chunk_delay=0.01))
    async with aclient.stream("POST", "/api/chat", json=chat_body()) as response:
        contents = [json.loads(line)["message"]["content"] async for line in response.aiter_lines()]
    assert contents == ["a", "b", "c", ""]


@pytest.mark.anyio
async def test_async_context_manager_and_disconnect() -> None:
    async with FakeOllamaServer() as server:
        server.script(OllamaReply.hanging(["x"]))
        async with httpx.AsyncClient(base_url=server.url) as http:
            with anyio.move_on_after(0.2):
                async with http.stream("POST", "/api/chat", json=chat_body()) as response:
                    async for _ in response.aiter_lines():
                        pass
        assert await server.chat_requests[0].wait_async()
        assert server.chat_requests[0].disconnected
        assert await server.wait_idle_async()
    assert server.open_connections == 0
