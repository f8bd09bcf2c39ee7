"""Properties 10 to 16 of properties.md for the Ollama adapter (hypothesis, both backends)."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from socket_bridge import SocketBridge

import ollm
from ollm_ollama import (
    OllamaProvider,
    message_from_ollama,
    message_to_ollama,
    tool_from_ollama,
    tool_to_ollama,
)

pytestmark = pytest.mark.anyio

HOST = "http://127.0.0.1:11434"
PROVIDER_EVENTS = (
    ollm.TextEvent,
    ollm.ThinkingEvent,
    ollm.ToolCallEvent,
    ollm.NoticeEvent,
    ollm.ErrorEvent,
    ollm.FinishEvent,
)

# -- strategies --------------------------------------------------------------------------

names = st.from_regex(r"[a-z][a-z0-9_]{0,15}", fullmatch=True)
models = st.from_regex(r"[a-z][a-z0-9.\-]{0,10}(:[a-z0-9]{1,6})?", fullmatch=True)
texts = st.text(max_size=30)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
args = st.dictionaries(texts, json_values, max_size=4)
tool_calls = st.builds(ollm.ToolCall, id=names, name=names, args=args)

_SIGNATURES = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff\xe0",
    "image/gif": b"GIF89a",
}
images = st.builds(
    lambda mime, tail: ollm.ImagePart(_SIGNATURES[mime] + tail, mime),
    st.sampled_from(sorted(_SIGNATURES)),
    st.binary(max_size=40),
)
system_messages = st.builds(ollm.Message.system, texts)
user_messages = st.builds(
    lambda text, pictures: ollm.Message(role="user", parts=(ollm.TextPart(text), *pictures)),
    texts,
    st.lists(images, max_size=2),
)
assistant_messages = st.builds(
    lambda text, calls, thinking: ollm.Message.assistant(
        text, tool_calls=tuple(calls), thinking=thinking
    ),
    texts,
    st.lists(tool_calls, max_size=3, unique_by=lambda c: c.id),
    st.none() | texts,
)
tool_messages = st.builds(lambda text, call: ollm.Message.tool(text, call=call), texts, tool_calls)
messages = st.one_of(system_messages, user_messages, assistant_messages, tool_messages)

schemas = st.builds(
    ollm.ToolSchema,
    name=names,
    description=texts,
    parameters=st.dictionaries(names, json_values, max_size=4),
)
floats = st.floats(-2.0, 2.0, allow_nan=False)
options = st.builds(
    ollm.GenerationOptions,
    temperature=st.none() | floats,
    max_tokens=st.none() | st.integers(1, 4096),
    top_p=st.none() | floats,
    top_k=st.none() | st.integers(1, 100),
    repeat_penalty=st.none() | floats,
    seed=st.none() | st.integers(-1, 2**31),
    stop=st.none() | st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=3).map(tuple),
    context_window=st.none() | st.integers(256, 131072),
)
requests = st.builds(
    ollm.ProviderRequest,
    model=models,
    messages=st.lists(messages, max_size=5).map(tuple),
    system_prompt=st.none() | texts,
    tools=st.lists(schemas, max_size=3, unique_by=lambda s: s.name).map(tuple),
    options=options,
    think=st.none() | st.booleans() | st.sampled_from(["low", "medium", "high"]),
)


@st.composite
def reply_chunks(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A reply as Ollama streams it: chunks of text, thinking and calls, then `done`."""

    def message() -> dict[str, Any]:
        body: dict[str, Any] = {"role": "assistant", "content": draw(texts)}
        thinking = draw(st.none() | texts)
        if thinking is not None:
            body["thinking"] = thinking
        calls = []
        for _ in range(draw(st.integers(0, 2))):
            arguments = draw(args)
            function: dict[str, Any] = {
                "name": draw(names),
                "arguments": json.dumps(arguments) if draw(st.booleans()) else arguments,
            }
            if draw(st.booleans()):
                function["index"] = 0  # never a merge key
            call: dict[str, Any] = {"function": function}
            call_id = draw(st.none() | names)
            if call_id is not None:
                call["id"] = call_id
            calls.append(call)
        if calls:
            body["tool_calls"] = calls
        return body

    chunks = [{"message": message(), "done": False} for _ in range(draw(st.integers(0, 8)))]
    last: dict[str, Any] = {"message": message(), "done": True}
    reason = draw(st.sampled_from([None, "stop", "length", "load"]))
    if reason is not None:
        last["done_reason"] = reason
    for field in ("prompt_eval_count", "eval_count", "total_duration", "eval_duration"):
        value = draw(st.none() | st.integers(1, 10**9))
        if value is not None:
            last[field] = value
    return [*chunks, last]


# -- a server played by an httpx transport -----------------------------------------------


def _transport(
    chat: Callable[[httpx.Request], httpx.Response], model_stop: str = ""
) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/ps":
            return httpx.Response(200, json={"models": []})  # not loaded: a notice first
        if request.url.path == "/api/show":
            return httpx.Response(200, json={"parameters": model_stop})
        return chat(request)

    return httpx.MockTransport(handle)


@pytest.fixture(scope="module")
def bridge() -> Iterator[SocketBridge]:
    """One real server for the module's examples (each sets its handler)."""
    server = SocketBridge()
    yield server
    server.close()


@pytest.fixture(params=["mock", "socket"])
def serve(
    request: pytest.FixtureRequest, bridge: SocketBridge
) -> Callable[[httpx.MockTransport], OllamaProvider]:
    """A provider for a server given as a MockTransport: in memory, or over a real socket
    through ollm-http's production stack (llhttp, the pool)."""

    def make(transport: httpx.MockTransport) -> OllamaProvider:
        if request.param == "mock":
            return OllamaProvider(HOST, transport=transport, environ={})
        bridge.handler = transport.handler  # type: ignore[attr-defined]
        return OllamaProvider(bridge.url, environ={})

    return make


Serve = Callable[[httpx.MockTransport], OllamaProvider]


def _streamed(lines: list[bytes], cuts: list[int]) -> httpx.Response:
    data = b"".join(lines)
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})

    async def pieces() -> AsyncIterator[bytes]:
        for start, end in itertools.pairwise(points):
            yield data[start:end]

    return httpx.Response(200, content=pieces())


async def _events(provider: OllamaProvider, request: ollm.ProviderRequest) -> list[Any]:
    stream = provider.chat_stream(request)
    assert hasattr(stream, "__aiter__")
    assert hasattr(stream, "__anext__")
    return [event async for event in stream]


def _expected_events(chunks: list[dict[str, Any]]) -> list[Any]:
    expected: list[Any] = []
    for line in chunks:
        message = line["message"]
        if message.get("thinking"):
            expected.append(ollm.ThinkingEvent(message["thinking"]))
        if message["content"]:
            expected.append(ollm.TextEvent(message["content"]))
        for call in message.get("tool_calls", ()):
            arguments = call["function"]["arguments"]
            if isinstance(arguments, str):
                arguments = json.loads(arguments)
            expected.append(("call", call.get("id"), call["function"]["name"], arguments))
    last = chunks[-1]
    prompt, completion = last.get("prompt_eval_count", 0), last.get("eval_count", 0)
    usage = ollm.Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        total_duration_ns=last.get("total_duration"),
        eval_duration_ns=last.get("eval_duration"),
    )
    reason: ollm.FinishReason = "length" if last.get("done_reason") == "length" else "stop"
    expected.append(ollm.FinishEvent(reason, usage))
    return expected


# -- the properties ----------------------------------------------------------------------


@given(
    chunks=reply_chunks(),
    fault=st.sampled_from(["none", "status", "bad_line", "error_line", "early_eof"]),
    status=st.sampled_from([400, 403, 404, 500, 502, 503]),
    cuts=st.lists(st.integers(0, 10**6), max_size=6),
)
async def test_property_10_chat_stream_is_an_async_iterable_of_provider_events(
    serve: Serve, chunks: list[dict[str, Any]], fault: str, status: int, cuts: list[int]
) -> None:
    """Property 10: whatever the server does, one terminal event, last, and nothing else."""
    lines = [json.dumps(line).encode() + b"\n" for line in chunks]
    if fault == "bad_line":
        lines.insert(len(lines) // 2, b"<html>oops</html>\n")
    elif fault == "error_line":
        lines.insert(len(lines) // 2, b'{"error":"runner crashed"}\n')
    elif fault == "early_eof":
        lines = lines[:-1]

    def chat(request: httpx.Request) -> httpx.Response:
        if fault == "status":
            return httpx.Response(status, json={"error": "it failed"})
        return _streamed(lines, cuts)

    async with serve(_transport(chat)) as provider:
        events = await _events(provider, ollm.ProviderRequest("m", (ollm.Message.user("hi"),)))
    assert events
    assert all(isinstance(e, PROVIDER_EVENTS) for e in events)
    terminal = [e for e in events if isinstance(e, ollm.FinishEvent | ollm.ErrorEvent)]
    assert terminal == [events[-1]]
    assert isinstance(events[-1], ollm.FinishEvent) == (fault == "none")


@given(request=requests, prompt_tokens=st.integers(1, 10**6), grown=st.lists(messages, max_size=3))
async def test_property_11_counts_are_positive_and_management_is_complete(
    serve: Serve, request: ollm.ProviderRequest, prompt_tokens: int, grown: list[ollm.Message]
) -> None:
    """Property 11: a positive count, anchored or not; list, pull, delete, show together."""
    done = {"message": {"content": "ok"}, "done": True, "prompt_eval_count": prompt_tokens}

    def chat(http_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=json.dumps(done).encode())

    async with serve(_transport(chat)) as provider:
        before = await provider.count_tokens(request)
        assert isinstance(before, int)
        assert before >= 1
        assert before == ollm.fallback_count(request)
        events = await _events(provider, request)
        assert isinstance(events[-1], ollm.FinishEvent)
        later = ollm.ProviderRequest(
            request.model,
            request.messages + tuple(grown),
            request.system_prompt,
            request.tools,
            options=request.options,
        )
        after = await provider.count_tokens(later)
        assert isinstance(after, int)
        assert after >= prompt_tokens
    assert isinstance(provider, ollm.ModelManagement)


@given(
    names=st.lists(
        st.sampled_from(["qwen3", "gemma3:4b", "phi4", "mistral:7b"]),
        min_size=1,
        max_size=3,
        unique=True,
    )
)
async def test_property_11_list_pull_show_and_delete_work_together(
    anyio_backend: str, names: list[str]
) -> None:
    """Property 11: pulled models are listed and shown; deleted ones are gone from both."""
    from ollm_testutils import FakeOllamaServer

    async with FakeOllamaServer(models=False) as server:
        for name in names:
            server.add_model(name, local=False)
        async with OllamaProvider(server.url, environ={}) as provider:
            assert await provider.list_models() == []
            for name in names:
                await provider.pull_model(name)
            listed = {m.name for m in await provider.list_models()}
            assert listed == {_full(n) for n in names}
            for name in names:
                assert (await provider.show_model(name)).name in (name, _full(name))
            await provider.delete_model(names[0])
            listed = {m.name for m in await provider.list_models()}
            assert listed == {_full(n) for n in names[1:]}
            with pytest.raises(ollm.ModelNotFoundError):
                await provider.show_model(names[0])


def _full(name: str) -> str:
    return name if ":" in name else f"{name}:latest"


@given(message=messages)
def test_property_12_message_to_wire_and_back_is_equal(message: ollm.Message) -> None:
    """Property 12: an ollm message through Ollama's JSON (and the network's) comes back equal."""
    wire = json.loads(json.dumps(message_to_ollama(message)))
    assert isinstance(wire["content"], str)
    assert message_from_ollama(wire) == message


@given(tool=schemas)
def test_property_13_tool_schemas_keep_names_descriptions_and_parameters(
    tool: ollm.ToolSchema,
) -> None:
    """Property 13: the function schema Ollama gets carries the tool unchanged."""
    wire = json.loads(json.dumps(tool_to_ollama(tool)))
    assert wire["type"] == "function"
    assert wire["function"]["name"] == tool.name
    assert wire["function"]["description"] == tool.description
    assert wire["function"]["parameters"] == tool.parameters
    assert tool_from_ollama(wire) == tool


_OPTION_NAMES = {
    "temperature": "temperature",
    "max_tokens": "num_predict",
    "top_p": "top_p",
    "top_k": "top_k",
    "repeat_penalty": "repeat_penalty",
    "seed": "seed",
    "context_window": "num_ctx",
}


@given(request=requests)
async def test_property_14_the_body_has_model_messages_and_options_in_ollamas_format(
    serve: Serve, request: ollm.ProviderRequest
) -> None:
    """Property 14: model, messages and options as Ollama reads them, stream always sent."""
    bodies: list[dict[str, Any]] = []

    def chat(http_request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(http_request.content))
        return httpx.Response(200, content=b'{"done":true}')

    async with serve(_transport(chat)) as provider:
        events = await _events(provider, request)
    assert isinstance(events[-1], ollm.FinishEvent), events
    (body,) = bodies
    assert body["model"] == request.model
    assert body["stream"] is True
    sent = body["messages"]
    if request.system_prompt:
        assert sent.pop(0) == {"role": "system", "content": request.system_prompt}
    assert len(sent) == len(request.messages)
    for wire, message in zip(sent, request.messages, strict=True):
        assert wire["role"] == message.role
        assert wire["content"] == message.text
        expected_images = [base64.b64encode(i.data).decode() for i in message.images]
        assert wire.get("images", []) == expected_images
        calls = wire.get("tool_calls", [])
        assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
            (c.id, c.name, c.args) for c in message.tool_calls
        ]
        if message.role == "tool":
            assert (wire["tool_name"], wire["tool_call_id"]) == (message.name, message.tool_call_id)
        assert "name" not in wire
    expected_options: dict[str, Any] = {}
    for field, name in _OPTION_NAMES.items():
        value = getattr(request.options, field)
        if value is not None:
            expected_options[name] = value
    if request.options.stop:
        expected_options["stop"] = list(dict.fromkeys(request.options.stop))
    assert body["options"] == expected_options
    assert [t["function"]["name"] for t in body.get("tools", [])] == [t.name for t in request.tools]
    assert body.get("think") == request.think


@given(chunks=reply_chunks(), cuts=st.lists(st.integers(0, 10**6), max_size=8))
async def test_property_15_every_chunk_becomes_the_matching_events(
    serve: Serve, chunks: list[dict[str, Any]], cuts: list[int]
) -> None:
    """Property 15: text, thinking and every call of every chunk (the last one too), in order."""
    lines = [json.dumps(line).encode() + b"\n" for line in chunks]
    transport = _transport(lambda request: _streamed(lines, cuts))
    async with serve(transport) as provider:
        events = await _events(provider, ollm.ProviderRequest("m", (ollm.Message.user("hi"),)))
    events = [e for e in events if not isinstance(e, ollm.NoticeEvent)]
    expected = _expected_events(chunks)
    assert len(events) == len(expected), (events, expected)
    for got, want in zip(events, expected, strict=True):
        if isinstance(want, tuple):
            assert isinstance(got, ollm.ToolCallEvent)
            _, call_id, name, arguments = want
            assert got.call.id
            assert call_id is None or got.call.id == call_id
            assert (got.call.name, got.call.args) == (name, arguments)
        else:
            assert got == want
    calls = [e.call for e in events if isinstance(e, ollm.ToolCallEvent)]
    wanted = [w for w in expected if isinstance(w, tuple)]
    made_up = [call.id for call, want in zip(calls, wanted, strict=True) if want[1] is None]
    assert len(set(made_up)) == len(made_up)


@given(request=requests)
async def test_property_16_a_connection_failure_is_an_error_event_with_a_code(
    closed_port: str,
    request: ollm.ProviderRequest,
    http_stack: str,
) -> None:
    """Property 16: a refused connection (a closed port on 127.0.0.1) is one error event."""
    async with OllamaProvider(closed_port, http=http_stack, environ={}) as provider:
        events = await _events(provider, request)
    assert len(events) == 1
    error = events[0]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == ollm.ErrorCode.CONNECTION_FAILED
    assert error.message == (
        f"Ollama is not running at {closed_port}. Start it with: ollama serve (install it from "
        "https://ollama.com/download first). No Ollama here? ollm chat -p echo answers with no "
        "server at all, and -p openai reaches any OpenAI-compatible server."
    )
