"""How /api/chat streams become provider events: text, thinking, calls, usage, bad lines."""

from __future__ import annotations

import gzip
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pytest_httpx import HTTPXMock, IteratorStream

import ollm
from ollm_ollama import OllamaProvider

pytestmark = pytest.mark.anyio

AddReply = Callable[..., None]  # the `reply` fixture
RunChat = Callable[..., Awaitable[list[ollm.ProviderEvent]]]  # the `chat` fixture

HOST = "http://127.0.0.1:11434"
Chunk = Callable[..., dict[str, Any]]


def _texts(events: list[ollm.ProviderEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, ollm.TextEvent)]


async def test_text_chunks_then_a_finish_with_usage(
    reply: AddReply, chat: RunChat, chunk: Chunk, final: Chunk
) -> None:
    reply(chunk("The"), chunk(" sky"), chunk(""), chunk(" is"), final(" blue."))
    events = await chat()
    assert events == [
        ollm.TextEvent("The"),
        ollm.TextEvent(" sky"),
        ollm.TextEvent(" is"),
        ollm.TextEvent(" blue."),
        ollm.FinishEvent(
            "stop",
            ollm.Usage(
                prompt_tokens=26,
                completion_tokens=282,
                total_tokens=308,
                total_duration_ns=4883583458,
                load_duration_ns=1334875,
                prompt_eval_duration_ns=342546000,
                eval_duration_ns=4535599000,
            ),
        ),
    ]


@pytest.mark.parametrize("pieces", [1, 2, 3, 7, 64])
async def test_lines_cut_anywhere_by_the_network_decode_the_same(
    reply: AddReply, chat: RunChat, chunk: Chunk, final: Chunk, pieces: int
) -> None:
    reply(chunk("héllo"), chunk(" wörld ✓"), chunk(thinking="…"), final("!"), pieces=pieces)
    events = await chat()
    assert _texts(events) == ["héllo", " wörld ✓", "!"]
    assert [e.text for e in events if isinstance(e, ollm.ThinkingEvent)] == ["…"]
    assert isinstance(events[-1], ollm.FinishEvent)


async def test_a_last_line_without_newline_is_read(
    reply: AddReply, chat: RunChat, chunk: Chunk, final: Chunk
) -> None:
    reply(chunk("a"), final("b"), newline_at_end=False)
    events = await chat()
    assert _texts(events) == ["a", "b"]
    assert isinstance(events[-1], ollm.FinishEvent)


async def test_a_single_json_object_answer_is_read(reply: AddReply, chat: RunChat) -> None:
    """A load answer (empty chat) comes as one object without a newline."""
    reply(
        body=b'{"model":"llama3.2","created_at":"2024-09-12T21:17:29.110811Z",'
        b'"message":{"role":"assistant","content":""},"done_reason":"load","done":true}'
    )
    events = await chat()
    assert events == [ollm.FinishEvent("stop", ollm.Usage())]


async def test_blank_lines_are_skipped(reply: AddReply, chat: RunChat, final: Chunk) -> None:
    reply(body=b"\n\r\n" + json.dumps(final("x")).encode() + b"\n\n")
    events = await chat()
    assert _texts(events) == ["x"]


async def test_thinking_comes_before_text_of_the_same_chunk(
    reply: AddReply, chat: RunChat, chunk: Chunk, final: Chunk
) -> None:
    reply(chunk("Answer", thinking="Reasoning"), final())
    events = await chat()
    assert events[:2] == [ollm.ThinkingEvent("Reasoning"), ollm.TextEvent("Answer")]


async def test_unknown_fields_are_ignored(reply: AddReply, chat: RunChat, final: Chunk) -> None:
    line = final(
        "x",
        logprobs=[{"token": "x", "logprob": -0.1}],
        remote_model="gpt-oss:120b",
        remote_host="https://ollama.com:443",
        _debug_info={"rendered": "..."},
    )
    line["message"]["images"] = None
    line["message"]["future_field"] = {"a": 1}
    reply(line)
    events = await chat()
    assert _texts(events) == ["x"]
    assert isinstance(events[-1], ollm.FinishEvent)


async def test_lines_after_done_are_not_read(reply: AddReply, chat: RunChat, final: Chunk) -> None:
    reply(final("end"), b"not json at all")
    events = await chat()
    assert isinstance(events[-1], ollm.FinishEvent)


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (b'data: {"message": {}}', "data: {"),
        (b"<html><body>502 Bad Gateway</body></html>", "<html>"),
        (b'["a", "list"]', "Expected `object`"),
        (b'{"done": "yes"}', "$.done"),
        (b'{"message": {"content": 5}}', "$.message.content"),
    ],
)
async def test_a_malformed_line_ends_the_stream_quoting_it(
    reply: AddReply, chat: RunChat, chunk: Chunk, line: bytes, found: str
) -> None:
    reply(chunk("ok"), line, chunk("never read"))
    events = await chat()
    assert _texts(events) == ["ok"]
    error = events[-1]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "BAD_RESPONSE"
    assert found in error.message


async def test_a_long_malformed_line_is_quoted_in_part(reply: AddReply, chat: RunChat) -> None:
    reply(b"x" * 5000)
    error = (await chat())[-1]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "BAD_RESPONSE"
    assert "x" * 200 in error.message
    assert "x" * 201 not in error.message
    assert len(error.message) < 700


@pytest.mark.parametrize(
    "call",
    [
        {"id": "x"},
        {"function": {"arguments": {}}},
    ],
)
async def test_a_tool_call_that_cannot_be_read_is_a_bad_response(
    reply: AddReply, chat: RunChat, chunk: Chunk, final: Chunk, call: dict[str, Any]
) -> None:
    reply(chunk(tool_calls=[call]), final())
    error = (await chat())[-1]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "BAD_RESPONSE"


async def test_several_calls_in_one_chunk_and_over_several(
    reply: AddReply, chat: RunChat, chunk: Chunk, final: Chunk
) -> None:
    reply(
        chunk(
            tool_calls=[
                {"id": "call_p7o2gz50", "function": {"index": 0, "name": "t", "arguments": {}}},
                {"id": "call_k2m9x0qa", "function": {"index": 1, "name": "c", "arguments": {}}},
            ]
        ),
        chunk(" ", tool_calls=[{"id": "z", "function": {"name": "d", "arguments": {"k": 1}}}]),
        final(),
    )
    events = await chat()
    assert [type(e) for e in events] == [
        ollm.ToolCallEvent,
        ollm.ToolCallEvent,
        ollm.TextEvent,
        ollm.ToolCallEvent,
        ollm.FinishEvent,
    ]


async def test_a_compressed_stream_from_a_proxy_is_decoded(
    ollama_mock: HTTPXMock, chat: RunChat, chunk: Chunk, final: Chunk
) -> None:
    body = (json.dumps(chunk("zip")) + "\n" + json.dumps(final("ped")) + "\n").encode()
    ollama_mock.add_response(
        method="POST",
        url=f"{HOST}/api/chat",
        stream=IteratorStream([gzip.compress(body)]),
        headers={"Content-Encoding": "gzip", "Content-Type": "application/x-ndjson"},
    )
    events = await chat()
    assert _texts(events) == ["zip", "ped"], events
    request = ollama_mock.get_requests(url=f"{HOST}/api/chat")[0]
    assert request.headers["accept-encoding"] == "identity"


# -- the notice while a cold model loads ---------------------------------------------


async def test_a_model_that_is_not_loaded_gets_a_notice_first(
    httpx_mock: HTTPXMock, provider: OllamaProvider, final: Chunk
) -> None:
    httpx_mock.add_response(method="GET", url=f"{HOST}/api/ps", json={"models": []})
    httpx_mock.add_response(method="POST", url=f"{HOST}/api/show", json={"capabilities": []})
    httpx_mock.add_response(
        method="POST", url=f"{HOST}/api/chat", content=json.dumps(final("hi")).encode()
    )
    httpx_mock.add_response(
        method="POST", url=f"{HOST}/api/chat", content=json.dumps(final("again")).encode()
    )
    request = ollm.ProviderRequest("qwen3", (ollm.Message.user("hi"),))
    first = [e async for e in provider.chat_stream(request)]
    assert first[0] == ollm.NoticeEvent(
        "Loading qwen3 into memory; the first reply can take a while.", "loading_model"
    )
    assert isinstance(first[-1], ollm.FinishEvent)
    # It answered a moment ago: it is loaded, and nobody asks /api/ps again.
    second = [e async for e in provider.chat_stream(request)]
    assert not any(isinstance(e, ollm.NoticeEvent) for e in second)
    assert len(httpx_mock.get_requests(url=f"{HOST}/api/ps")) == 1


async def test_no_notice_when_the_check_fails_and_the_chat_goes_on(
    httpx_mock: HTTPXMock, provider: OllamaProvider, final: Chunk
) -> None:
    httpx_mock.add_response(method="GET", url=f"{HOST}/api/ps", status_code=500)
    httpx_mock.add_response(
        method="POST", url=f"{HOST}/api/chat", content=json.dumps(final("hi")).encode()
    )
    request = ollm.ProviderRequest("qwen3", (ollm.Message.user("hi"),))
    events = [e async for e in provider.chat_stream(request)]
    assert events[0] == ollm.TextEvent("hi")


async def test_no_notice_for_a_model_the_server_does_not_have(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    httpx_mock.add_response(method="GET", url=f"{HOST}/api/ps", json={"models": []})
    httpx_mock.add_response(
        method="POST",
        url=f"{HOST}/api/show",
        status_code=404,
        json={"error": "model 'nope:latest' not found"},
    )
    httpx_mock.add_response(
        method="POST",
        url=f"{HOST}/api/chat",
        status_code=404,
        json={"error": "model 'nope' not found"},
    )
    request = ollm.ProviderRequest("nope", (ollm.Message.user("hi"),))
    events = [e async for e in provider.chat_stream(request)]
    assert len(events) == 1
    assert isinstance(events[0], ollm.ErrorEvent)
    assert events[0].code == "MODEL_NOT_FOUND"
