"""Compressed bodies: decoded on every path and any transport, refused in words when
ollm cannot read them, and a compression bomb stopped early, in bounded memory, and
at once by a cancel scope or an abort.

Real sockets on 127.0.0.1 (``raw_server``), on asyncio and trio; ``httpx.MockTransport``
for bodies a transport hands over already read.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Awaitable, Callable

import anyio
import httpx
import msgspec
import pytest
from raw_http import ok, raw_server

import ollm
from ollm.types import AbortSignal
from ollm_http import ErrorContext, HTTPClient, HTTPConfig, Limits, body_reader

pytestmark = pytest.mark.anyio

CONTEXT = ErrorContext(provider="The test server", code_name="test", url_setting="TEST_URL")
PIECE = 64 * 1024  # the most one read of a compressed body gives
HANG_GUARD = 60  # seconds: a hang detector only (an unguarded bomb runs for minutes)
JSON = b'{"models": [{"name": "llama3"}, {"name": "qwen3"}], "note": "' + b"x" * 3000 + b'"}'
NDJSON = b'{"a": 1}\n{"b": 2}\n'
SSE = b'data: {"a": 1}\n\nevent: done\ndata: [DONE]\n\n'


def deflate(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


ENCODINGS = {
    "gzip": (b"gzip", gzip.compress),
    "x-gzip": (b"x-gzip", gzip.compress),
    "deflate": (b"deflate", lambda data: deflate(data, zlib.MAX_WBITS)),
    # What many servers send as "deflate": no zlib header (httpx reads it too).
    "raw deflate": (b"deflate", lambda data: deflate(data, -zlib.MAX_WBITS)),
    "identity": (b"identity", lambda data: data),
}


def packed(body: bytes, encoding: str) -> bytes:
    name, pack = ENCODINGS[encoding]
    return ok(pack(body), extra=b"Content-Encoding: %s\r\n" % name)


def client(url: str, **settings: object) -> HTTPClient:
    return HTTPClient(HTTPConfig(url, context=CONTEXT, **settings))  # type: ignore[arg-type]


async def read_all(reads: Callable[[], Awaitable[bytes]]) -> list[bytes]:
    pieces: list[bytes] = []
    while True:
        try:
            pieces.append(await reads())
        except StopAsyncIteration:
            return pieces


@pytest.mark.parametrize("encoding", list(ENCODINGS))
async def test_a_compressed_body_is_decoded_on_every_path(encoding: str) -> None:
    answers = [packed(body, encoding) for body in (JSON, JSON, NDJSON, SSE, NDJSON * 3000)]
    async with raw_server(answers) as server:
        http = client(server.url)
        assert (await http.request("GET", "/models")).json()["models"][1] == {"name": "qwen3"}
        async with http.stream("GET", "/models") as reply:
            assert await reply.aread() == JSON
        async with http.stream("POST", "/lines", json={}) as reply:
            assert [line async for line in reply.lines()] == [b'{"a": 1}', b'{"b": 2}']
        async with http.stream("POST", "/events", json={}) as reply:
            assert [(e.event, e.data) async for e in reply.sse()] == [
                ("message", '{"a": 1}'),
                ("done", "[DONE]"),
            ]
        reply = await http.open("POST", "/chat", json={})
        pieces = await read_all(body_reader(reply.response))
        assert b"".join(pieces) == NDJSON * 3000
        assert max(map(len, pieces)) <= PIECE
        await reply.aclose()
        await http.aclose()
    assert all(b"accept-encoding: gzip, deflate\r\n" in r.lower() for r in server.requests)


@pytest.mark.parametrize(
    ("encoding", "named"),
    [(b"br", "'br'"), (b"zstd", "'zstd'"), (b"gzip, gzip", "'gzip, gzip'"), (b"x-x", "'x-x'")],
)
async def test_an_encoding_ollm_cannot_read_is_refused_in_words(
    encoding: bytes, named: str
) -> None:
    raw = ok(b"\x1f\x8b compressed bytes", extra=b"Content-Encoding: %s\r\n" % encoding)
    async with raw_server([raw, raw]) as server:
        http = client(server.url)
        with pytest.raises(ollm.BadResponseError) as caught:
            await http.request("GET", "/models")
        assert str(caught.value) == (
            f"The test server at {server.url} sent a reply ollm cannot read: it is compressed "
            f"as {named}, which ollm does not read (it asks for gzip or deflate, once). If a "
            "proxy between them compresses replies, have it send gzip, deflate or no compression."
        )
        reply = await http.open("POST", "/chat", json={})
        with pytest.raises(httpx.DecodingError) as raw_error:
            body_reader(reply.response)
        assert http.error(raw_error.value).message == caught.value.message
        await reply.aclose()
        await http.aclose()


async def test_corrupt_compressed_data_is_a_bad_response() -> None:
    broken = gzip.compress(b"")[:10] + b"\x07" * 8  # a block of a type deflate does not have
    async with raw_server([ok(broken, extra=b"Content-Encoding: gzip\r\n")]) as server:
        http = client(server.url)
        with pytest.raises(ollm.BadResponseError, match="its gzip data is corrupt"):
            await http.request("GET", "/models")
        await http.aclose()


async def test_a_body_a_transport_hands_over_already_read_is_read_from_memory() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/denied":
            return httpx.Response(401, json={"error": "bad key"})
        return httpx.Response(
            200, content=gzip.compress(NDJSON), headers={"Content-Encoding": "gzip"}
        )

    http = HTTPClient(HTTPConfig("http://mock"), transport=httpx.MockTransport(answer))
    denied = await http.request("GET", "/denied")
    assert (denied.status, denied.json()) == (401, {"error": "bad key"})
    async with http.stream("POST", "/denied", json={}) as reply:
        assert await reply.aread() == b'{"error":"bad key"}'
    async with http.stream("POST", "/lines", json={}) as reply:
        assert [line async for line in reply.lines()] == [b'{"a": 1}', b'{"b": 2}']
    reply = await http.open("POST", "/lines", json={})
    assert b"".join(await read_all(body_reader(reply.response))) == NDJSON
    await reply.aclose()
    await http.aclose()


def bomb(gibibytes: int = 1) -> bytes:
    """About 1 MiB of gzip that inflates to ``gibibytes`` GiB of newlines."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    mebibyte = b"\n" * (1 << 20)
    first = packer.compress(mebibyte) + packer.flush(zlib.Z_FULL_FLUSH)
    # After a full flush each MiB packs the same way, with nothing carried over.
    again = packer.compress(mebibyte) + packer.flush(zlib.Z_FULL_FLUSH)
    return first + again * (1024 * gibibytes - 1)


BOMB = ok(bomb(), extra=b"Content-Encoding: gzip\r\n")
BOMB_REFUSED = (
    r"^The test server at http://127\.0\.0\.1:\d+ sent a reply ollm cannot read: its gzip "
    r"data inflates to more than 100 times its size \(a compression bomb\?\): ollm stopped "
    r"after \d+ KiB decoded from \d+ bytes\. If its replies really are that compressible, "
    r"raise Limits\.max_ratio\.$"
)


async def read_through(http: HTTPClient, how: str) -> None:
    async with http.stream("POST", "/chat", json={}) as reply:
        if how == "lines":
            async for _line in reply.lines():
                pass
        elif how == "sse":
            async for _event in reply.sse():
                pass
        else:
            await reply.aread()


@pytest.mark.parametrize("how", ["lines", "sse", "aread"])
async def test_a_compression_bomb_is_refused_early_in_words(how: str) -> None:
    async with raw_server([BOMB]) as server:
        http = client(server.url)
        with (
            anyio.fail_after(HANG_GUARD),
            pytest.raises(ollm.BadResponseError, match=BOMB_REFUSED),
        ):
            await read_through(http, how)
        await http.aclose()


async def test_a_compression_bomb_through_body_reader_stops_in_bounded_pieces() -> None:
    async with raw_server([BOMB]) as server:
        http = client(server.url)
        reply = await http.open("POST", "/chat", json={})
        reads = body_reader(reply.response)
        sizes: list[int] = []

        async def read_on() -> None:
            while True:
                sizes.append(len(await reads()))

        with pytest.raises(httpx.DecodingError) as caught:
            await read_on()
        assert max(sizes) <= PIECE
        assert sum(sizes) <= 2 * 1024 * 1024  # refused soon after its first free MiB
        error = http.error(caught.value, streaming=True)
        assert error.code == "BAD_RESPONSE"
        assert "compression bomb" in error.message
        await reply.aclose()
        await http.aclose()


async def test_a_reply_the_httpx_client_reads_whole_is_decoded_in_bounded_pieces() -> None:
    """What a provider's own ``client().send(stream=False)`` gets (Ollama's model list)."""
    async with raw_server([packed(JSON, "gzip"), BOMB]) as server:
        http = client(server.url)
        whole = await http.client().get(http.url("/api/tags"))
        assert whole.json()["models"][1] == {"name": "qwen3"}
        assert "content-encoding" not in whole.headers  # decoded now
        with pytest.raises(httpx.DecodingError) as caught:
            await http.client().get(http.url("/api/tags"))
        assert http.error(caught.value).code == "BAD_RESPONSE"
        await http.aclose()


@pytest.mark.parametrize("stop", ["cancel scope", "abort"])
async def test_a_cancel_scope_or_an_abort_ends_a_bomb_at_its_next_piece(stop: str) -> None:
    """With the ratio guard out of the way, only the pieces let a cancellation in: the
    lines of the piece at hand still come, then it ends."""
    abort = AbortSignal()
    scope = anyio.CancelScope()
    guard = scope if stop == "cancel scope" else abort.guard()
    stop_now = scope.cancel if stop == "cancel scope" else abort.abort
    async with raw_server([BOMB]) as server:
        http = client(server.url, limits=Limits(max_ratio=10**9))
        with anyio.fail_after(HANG_GUARD):
            async with http.stream("POST", "/chat", json={}) as reply:
                after = 0
                with guard as cancelled:
                    async for _line in reply.lines():
                        stop_now()
                        after += 1
        assert cancelled.cancelled_caught
        assert after <= PIECE + 1
        await http.aclose()


async def test_json_nested_past_msgspecs_depth_is_a_decode_error() -> None:
    deep = b"[" * 5000 + b"]" * 5000
    async with raw_server([ok(deep)]) as server:
        http = client(server.url)
        reply = await http.request("GET", "/")
        with pytest.raises(msgspec.DecodeError, match="nested too deeply"):
            reply.json()
        await http.aclose()
