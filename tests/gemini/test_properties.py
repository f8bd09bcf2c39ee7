"""Properties of the Gemini provider, against the fake API on 127.0.0.1.

- Any split of the SSE body (and either line ending) gives the same events.
- Any history of user turns, replies and parallel calls is sent as ``contents`` the API
  accepts (roles, non-empty parts, one response per call, in order).
- Any tool schema is either written in Gemini's subset, accepted by the API, or sent
  as JSON Schema; never a refusal by the API.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ollm
from ollm_gemini import GeminiProvider
from ollm_testutils import FakeGeminiServer, GeminiReply

from .conftest import KEY, MODEL


@pytest.fixture(scope="module")
def shared() -> Iterator[FakeGeminiServer]:
    with FakeGeminiServer(api_key=KEY) as server:
        yield server


def events_of(server: FakeGeminiServer, request: ollm.ProviderRequest) -> list[Any]:
    async def go() -> list[Any]:
        async with GeminiProvider(KEY, base_url=server.url, environ={}) as provider:
            return [e async for e in provider.chat_stream(request)]

    return anyio.run(go)


def request(prompt: str = "hi", **fields: Any) -> ollm.ProviderRequest:
    return ollm.ProviderRequest(model=MODEL, messages=(ollm.Message.user(prompt),), **fields)


def sse_body(replies: list[dict[str, Any]], end: str) -> bytes:
    return b"".join(f"data: {json.dumps(r)}{end}{end}".encode() for r in replies)


texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    parts: list[list[dict[str, Any]]] = []
    for text in draw(st.lists(texts, max_size=4)):
        parts.append([{"text": text, "thought": True}])
    for text in draw(st.lists(texts, max_size=5)):
        parts.append([{"text": text}])
    calls = draw(st.lists(st.dictionaries(st.sampled_from("abc"), st.integers()), max_size=3))
    if calls:
        parts.append([{"functionCall": {"name": "f", "args": args}} for args in calls])
    replies: list[dict[str, Any]] = [
        {"candidates": [{"content": {"parts": p, "role": "model"}, "index": 0}]} for p in parts
    ]
    replies.append(
        {
            "candidates": [{"finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4},
        }
    )
    body = sse_body(replies, draw(st.sampled_from(["\r\n", "\n"])))
    cuts = sorted(draw(st.lists(st.integers(1, max(1, len(body) - 1)), max_size=12, unique=True)))
    return body, cuts


def without_ids(events: list[ollm.ProviderEvent]) -> list[ollm.ProviderEvent]:
    """The events with the ids ollm makes for calls (random) in one form."""
    return [
        ollm.ToolCallEvent(msgspec.structs.replace(e.call, id="call"))
        if isinstance(e, ollm.ToolCallEvent) and e.call.id.startswith("call_")
        else e
        for e in events
    ]


@given(streams())
def test_any_split_of_the_stream_gives_the_same_events(
    shared: FakeGeminiServer, stream: tuple[bytes, list[int]]
) -> None:
    body, cuts = stream
    edges = [0, *cuts, len(body)]
    pieces = [body[a:b] for a, b in itertools.pairwise(edges) if b > a]
    shared.reset()
    shared.script(GeminiReply(raw=[body]), GeminiReply(raw=pieces))
    whole = without_ids(events_of(shared, request()))
    split = without_ids(events_of(shared, request()))
    assert split == whole
    assert isinstance(whole[-1], ollm.FinishEvent)


@st.composite
def histories(draw: st.DrawFn) -> tuple[ollm.Message, ...]:
    messages: list[ollm.Message] = []
    number = 0
    for _ in range(draw(st.integers(1, 5))):
        messages.append(ollm.Message.user(draw(texts)))
        for _ in range(draw(st.integers(0, 2))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                calls.append(ollm.ToolCall(f"call_{number}", "f", {"n": number}))
                number += 1
            said = draw(st.sampled_from(["", "Let me check."]))
            messages.append(ollm.Message.assistant(said, tool_calls=tuple(calls)))
            for call in calls:
                error = draw(st.booleans())
                messages.append(ollm.Message.tool(f"r{call.id}", call=call, is_error=error))
        if draw(st.booleans()):
            messages.append(ollm.Message.assistant(draw(texts)))
        if draw(st.booleans()):
            messages.append(ollm.Message.assistant("", incomplete=True))
    return tuple(messages)


@given(histories(), st.sampled_from([MODEL, "gemini-3-pro-preview"]))
def test_any_history_is_sent_as_contents_the_api_accepts(
    shared: FakeGeminiServer, history: tuple[ollm.Message, ...], model: str
) -> None:
    shared.reset()
    tool = ollm.ToolSchema(
        name="f", parameters={"type": "object", "properties": {"n": {"type": "integer"}}}
    )
    sent = ollm.ProviderRequest(model=model, messages=history, tools=(tool,))
    events = events_of(shared, sent)
    assert not [e for e in events if isinstance(e, ollm.ErrorEvent)], events
    contents = shared.generate_requests[0].json["contents"]
    calls = [
        p["functionCall"]["args"]["n"] for c in contents for p in c["parts"] if "functionCall" in p
    ]
    answers = [
        p["functionResponse"]["response"]
        for c in contents
        for p in c["parts"]
        if "functionResponse" in p
    ]
    expected = [c.args["n"] for m in history for c in m.tool_calls]
    assert calls == expected
    assert len(answers) == len(expected)


json_types = st.sampled_from(["string", "integer", "number", "boolean"])


def schemas(depth: int = 3) -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.one_of(
        json_types.map(lambda t: {"type": t}),
        st.just({}),
        st.lists(st.sampled_from(["a", "b", 1, None]), min_size=1, max_size=3, unique=True).map(
            lambda values: {"enum": values}
        ),
        st.tuples(json_types, json_types).map(lambda ts: {"type": list(ts)}),
        json_types.map(lambda t: {"type": [t, "null"]}),
        st.just({"type": "string", "format": "uri"}),
        st.just({"$ref": "#/$defs/Leaf"}),
    )
    if depth == 0:
        return leaf
    inner = schemas(depth - 1)
    return st.one_of(
        leaf,
        inner.map(lambda s: {"type": "array", "items": s}),
        st.dictionaries(st.sampled_from(["x", "y", "z"]), inner, min_size=1, max_size=3).map(
            lambda props: {"type": "object", "properties": props, "required": list(props)[:1]}
        ),
        st.lists(inner, min_size=2, max_size=3).map(lambda options: {"anyOf": options}),
    )


@given(st.dictionaries(st.sampled_from(["p", "q"]), schemas(), min_size=1, max_size=2))
def test_any_tool_schema_reaches_the_api(
    shared: FakeGeminiServer, properties: dict[str, Any]
) -> None:
    shared.reset()
    parameters = {
        "type": "object",
        "properties": properties,
        "$defs": {"Leaf": {"type": "string", "description": "a leaf"}},
    }
    tool = ollm.ToolSchema(name="t", parameters=parameters)
    events = events_of(shared, request(tools=(tool,)))
    assert not [e for e in events if isinstance(e, ollm.ErrorEvent)], events
    declaration = shared.generate_requests[0].json["tools"][0]["functionDeclarations"][0]
    assert ("parameters" in declaration) != ("parametersJsonSchema" in declaration)
