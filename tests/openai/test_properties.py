"""Properties of the OpenAI-compatible stream: any split of the bytes, any interleaving."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
from hypothesis import given
from hypothesis import strategies as st

import ollm
from ollm_openai import OpenAIProvider, ToolCallAssembler, ToolCallDelta

from .conftest import request_for

NAMES = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
ARGS = st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=4)


def _event(value: dict[str, Any], newline: bytes) -> bytes:
    return b"data: " + json.dumps(value).encode() + newline + newline


def _body(
    texts: list[str], thinking: list[str], calls: list[tuple[str, dict[str, Any]]], newline: bytes
) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [b": keep-alive comment" + newline + newline]
    out += [_event(chunk({"reasoning_content": t}), newline) for t in thinking]
    out += [_event(chunk({"content": t}), newline) for t in texts]
    for i, (name, args) in enumerate(calls):
        text = json.dumps(args)
        out.append(
            _event(
                chunk(
                    {
                        "tool_calls": [
                            {"index": i, "id": f"c{i}", "function": {"name": name, "arguments": ""}}
                        ]
                    }
                ),
                newline,
            )
        )
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            out.append(
                _event(
                    chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}), newline
                )
            )
    out.append(_event(chunk({}, "tool_calls" if calls else "stop"), newline))
    out.append(
        _event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}, newline)
    )
    out.append(b"data: [DONE]" + newline + newline)
    return b"".join(out)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


class _Blocks(httpx.AsyncByteStream):
    def __init__(self, blocks: list[bytes]) -> None:
        self.blocks = blocks

    async def __aiter__(self) -> Iterator[bytes]:  # type: ignore[override]
        for block in self.blocks:
            yield block


def _events(blocks: list[bytes]) -> list[ollm.ProviderEvent]:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Blocks(blocks)
        )

    async def run() -> list[ollm.ProviderEvent]:
        transport = httpx.MockTransport(handler)
        async with OpenAIProvider(
            "http://sse.test/v1", transport=transport, environ={}
        ) as provider:
            return [event async for event in provider.chat_stream(request_for())]

    return anyio.run(run)


@given(
    texts=st.lists(st.text(min_size=1, max_size=10), max_size=6),
    thinking=st.lists(st.text(min_size=1, max_size=6), max_size=3),
    calls=st.lists(st.tuples(NAMES, ARGS), max_size=3),
    newline=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
)
def test_any_split_of_the_byte_stream_gives_the_same_events(
    texts: list[str],
    thinking: list[str],
    calls: list[tuple[str, dict[str, Any]]],
    newline: bytes,
    cuts: list[int],
) -> None:
    body = _body(texts, thinking, calls, newline)
    whole = _events([body])
    assert _events(_split(body, cuts)) == whole
    assert (
        _events(
            [bytes([b]) for b in body[:300]] + [body[300:]]
            if body[300:]
            else [bytes([b]) for b in body]
        )
        == whole
    )
    # And the events are the right ones.
    assert [e.text for e in whole if isinstance(e, ollm.TextEvent)] == texts
    assert [e.text for e in whole if isinstance(e, ollm.ThinkingEvent)] == thinking
    got = [
        (e.call.id, e.call.name, e.call.args) for e in whole if isinstance(e, ollm.ToolCallEvent)
    ]
    assert got == [(f"c{i}", name, args) for i, (name, args) in enumerate(calls)]
    finish = whole[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.usage == ollm.Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7)


@st.composite
def _interleavings(
    draw: st.DrawFn,
) -> tuple[list[tuple[str, str, dict[str, Any]]], list[ToolCallDelta]]:
    calls = draw(st.lists(st.tuples(NAMES, ARGS), min_size=1, max_size=4))
    streams: list[list[ToolCallDelta]] = []
    expected = []
    for index, (name, args) in enumerate(calls):
        text = json.dumps(args)
        cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=5)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        call_id = f"id{index}"
        deltas = [_delta(index, call_id, name, "")]
        deltas += [_delta(index, None, None, piece) for piece in pieces]
        # Some servers repeat the id and name on later deltas.
        if draw(st.booleans()):
            deltas.append(_delta(index, call_id, name, ""))
        streams.append(deltas)
        expected.append((call_id, name, args))
    merged: list[ToolCallDelta] = []
    positions = [0] * len(streams)
    while any(p < len(s) for p, s in zip(positions, streams, strict=True)):
        open_streams = [i for i, s in enumerate(streams) if positions[i] < len(s)]
        pick = draw(st.sampled_from(open_streams))
        merged.append(streams[pick][positions[pick]])
        positions[pick] += 1
    return expected, merged


def _delta(index: int, call_id: str | None, name: str | None, arguments: str) -> ToolCallDelta:
    import msgspec

    value: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        value["id"] = call_id
    if name is not None:
        value["function"]["name"] = name
    return msgspec.convert(value, ToolCallDelta)


@given(_interleavings(), st.integers(min_value=1, max_value=4))
def test_tool_deltas_in_any_interleaving_assemble_to_the_same_calls(
    case: tuple[list[tuple[str, str, dict[str, Any]]], list[ToolCallDelta]], per_chunk: int
) -> None:
    expected, deltas = case
    assembler = ToolCallAssembler()
    for start in range(0, len(deltas), per_chunk):
        assembler.feed(deltas[start : start + per_chunk])
    calls = assembler.calls()
    assert [(c.id, c.name, c.args) for c in calls] == expected
    assert all(c.invalid_args is None for c in calls)
