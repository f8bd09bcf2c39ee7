"""NDJSON lines and Server-Sent Events out of byte blocks split anywhere."""

from __future__ import annotations

import itertools

import httpx
import msgspec
import pytest
from httpx_sse import EventSource
from hypothesis import example, given
from hypothesis import strategies as st
from raw_http import ok, raw_server

import ollm
from ollm_http import EventSplitter, HTTPClient, HTTPConfig, LineSplitter, LineTooLongError


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


BOM = b"\xef\xbb\xbf"


@given(
    st.sampled_from([b"", BOM, BOM[:2]]),
    st.binary(max_size=300),
    st.lists(st.integers(0, 400), max_size=12),
)
def test_lines_are_the_same_however_the_bytes_are_split(
    start: bytes, data: bytes, cuts: list[int]
) -> None:
    """A byte-order mark before the first line is dropped (msgspec would refuse it)."""
    splitter = LineSplitter()
    got: list[bytes] = []
    for block in split_at(start + data, cuts):
        got.extend(splitter.feed(block))
    last = splitter.end()
    if last is not None:
        got.append(last)
    expected = (start + data).removeprefix(BOM).split(b"\n")
    if expected[-1] == b"":
        expected.pop()
    assert got == [line.removesuffix(b"\r") for line in expected]


def test_an_endless_line_is_refused_once_past_the_limit() -> None:
    splitter = LineSplitter(max_line=1000)
    splitter.feed(b"x" * 600)
    with pytest.raises(LineTooLongError, match="longer than 1000 bytes"):
        splitter.feed(b"x" * 600)
    assert isinstance(LineTooLongError("x"), ollm.BadResponseError)


_SSE_LINES = st.one_of(
    st.sampled_from(["", "", "data: [DONE]", ": comment", "event: delta", "id: 7", "retry: 10"]),
    st.builds(lambda v: f"data: {v}", st.text(alphabet='ab {}"é:', max_size=8)),
    st.builds(lambda v: f"data:{v}", st.text(alphabet="ab :", max_size=5)),
    st.builds(
        lambda f, v: f"{f}:{v}",
        st.sampled_from(["id", "retry", "event", "x"]),
        st.text(alphabet="12 a\0", max_size=4),
    ),
    st.text(alphabet="da:ti ", max_size=6),
)


async def _reference(data: bytes) -> list[tuple[str, str, str, int | None]]:
    response = httpx.Response(200, content=data, headers={"content-type": "text/event-stream"})
    return [(e.event, e.data, e.id, e.retry) async for e in EventSource(response).aiter_sse()]


@given(
    # each line with its own end: servers and proxies mix them
    st.lists(st.tuples(_SSE_LINES, st.sampled_from(["\n", "\r\n", "\r"])), max_size=20),
    st.lists(st.integers(0, 500), max_size=10),
    st.booleans(),
)
# The mark split between blocks, before an event: it must not cost the event.
@example(
    lines=[("data: Hello", "\n"), ("", "\n"), ("data: world", "\r\n"), ("", "\r")],
    cuts=[1],
    bom=True,
)
def test_events_agree_with_httpx_sse_however_split(
    lines: list[tuple[str, str]], cuts: list[int], bom: bool
) -> None:
    """Differential: httpx-sse (the reference) and EventSplitter give the same events.

    A byte-order mark before the stream is dropped, as the SSE specification says;
    httpx-sse keeps it (and so loses the first event), so it is given the stream
    without one.
    """
    import anyio

    data = "".join(line + end for line, end in lines).encode()
    expected = anyio.run(_reference, data)
    splitter = EventSplitter()
    got = []
    for block in split_at(BOM + data if bom else data, cuts):
        got.extend(splitter.feed(block))
    got.extend(splitter.end())
    assert [(e.event, e.data, e.id, e.retry) for e in got] == expected


def test_an_endless_event_is_refused() -> None:
    splitter = EventSplitter(max_event=100)
    for _ in range(6):
        splitter.feed(b"data: 0123456789\n")
    with pytest.raises(LineTooLongError, match="event longer than 100"):
        splitter.feed(b"data: 0123456789\n")


@pytest.mark.anyio
async def test_sse_and_lines_through_a_real_socket() -> None:
    sse = b'data: {"a": 1}\r\n\r\nevent: done\r\ndata: [DONE]\r\n\r\n'
    ndjson = b'{"a": 1}\n{"b": 2}'
    async with raw_server([ok(sse), ok(ndjson)]) as server:
        http = HTTPClient(HTTPConfig(server.url))
        async with http.stream("POST", "/sse", json={}) as reply:
            events = [e async for e in reply.sse()]
        assert [(e.event, e.data) for e in events] == [("message", '{"a": 1}'), ("done", "[DONE]")]
        assert events[0].json() == {"a": 1}
        async with http.stream("POST", "/lines", json={}) as reply:
            assert [line async for line in reply.lines()] == [b'{"a": 1}', b'{"b": 2}']
        await http.aclose()


@pytest.mark.anyio
async def test_a_byte_order_mark_before_the_first_event_or_line_is_dropped() -> None:
    sse = BOM + b"data: Hello\n\ndata: world\n\n"
    ndjson = BOM + b'{"a": 1}\n{"b": 2}\n'
    async with raw_server([ok(sse), ok(ndjson)]) as server:
        http = HTTPClient(HTTPConfig(server.url))
        async with http.stream("POST", "/sse", json={}) as reply:
            assert [e.data async for e in reply.sse()] == ["Hello", "world"]
        async with http.stream("POST", "/lines", json={}) as reply:
            assert [msgspec.json.decode(line) async for line in reply.lines()] == [
                {"a": 1},
                {"b": 2},
            ]
        await http.aclose()
