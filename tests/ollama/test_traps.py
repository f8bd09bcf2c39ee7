"""Every trap of ollama-wire.md section 8, one test (or more) each, named by its number."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

import ollm
from ollm_ollama import OllamaProvider

pytestmark = pytest.mark.anyio

HOST = "http://127.0.0.1:11434"
Chunk = Callable[..., dict[str, Any]]
Sent = Callable[[], list[dict[str, Any]]]


def _calls(events: list[ollm.ProviderEvent]) -> list[ollm.ToolCall]:
    return [e.call for e in events if isinstance(e, ollm.ToolCallEvent)]


def _finish(events: list[ollm.ProviderEvent]) -> ollm.FinishEvent:
    last = events[-1]
    assert isinstance(last, ollm.FinishEvent), events
    return last


def _error(events: list[ollm.ProviderEvent]) -> ollm.ErrorEvent:
    last = events[-1]
    assert isinstance(last, ollm.ErrorEvent), events
    return last


async def test_trap_01_stream_is_always_sent(
    reply: Any, chat: Any, sent: Sent, final: Chunk
) -> None:
    """Trap 1: the server streams when `stream` is left out, so it is always sent."""
    reply(final("hi"))
    await chat()
    body = sent()[0]
    assert body["stream"] is True


async def test_trap_02_arguments_are_objects_in_history(
    reply: Any, chat: Any, sent: Sent, final: Chunk
) -> None:
    """Trap 2: history tool calls carry arguments as a JSON object, never a string."""
    reply(final("done"))
    call = ollm.ToolCall("call_1", "get_temperature", {"city": "New York", "units": ["c"]})
    messages = (
        ollm.Message.user("temperature?"),
        ollm.Message.assistant("", tool_calls=(call,)),
        ollm.Message.tool("22°C", call=call),
    )
    await chat(messages=messages)
    wire_call = sent()[0]["messages"][1]["tool_calls"][0]
    assert wire_call["function"]["arguments"] == {"city": "New York", "units": ["c"]}
    assert not isinstance(wire_call["function"]["arguments"], str)


async def test_trap_02_arguments_in_a_reply_as_object_or_json_string(
    reply: Any, chat: Any, chunk: Chunk, final: Chunk
) -> None:
    """Trap 2 (ollama-python#484): decode an object, and defensively a JSON string."""
    reply(
        chunk(tool_calls=[{"function": {"name": "a", "arguments": {"x": 1}}}]),
        chunk(tool_calls=[{"function": {"name": "b", "arguments": '{"y": "2"}'}}]),
        chunk(tool_calls=[{"function": {"name": "c"}}]),
        final(),
    )
    calls = _calls(await chat())
    assert [(c.name, c.args) for c in calls] == [("a", {"x": 1}), ("b", {"y": "2"}), ("c", {})]


async def test_trap_02_arguments_that_are_not_an_object_go_back_to_the_model(
    reply: Any, chat: Any, chunk: Chunk, final: Chunk
) -> None:
    """A broken JSON string is the model's mistake, not the server's: the call is refused."""
    reply(
        chunk(tool_calls=[{"function": {"name": "a", "arguments": '{"x": 1,'}}]),
        chunk(tool_calls=[{"function": {"name": "b", "arguments": "[1, 2]"}}]),
        final(),
    )
    events = await chat()
    assert not any(isinstance(e, ollm.ErrorEvent) for e in events)
    calls = _calls(events)
    assert [(c.name, c.args, c.invalid_args) for c in calls] == [
        ("a", {}, '{"x": 1,'),
        ("b", {}, "[1, 2]"),
    ]


async def test_trap_03_ids_are_made_up_when_missing_and_kept_verbatim_when_sent(
    reply: Any, chat: Any, chunk: Chunk, final: Chunk
) -> None:
    """Trap 3: no `id` before v0.12.10; its format is not guaranteed (llama-server ids)."""
    reply(
        chunk(tool_calls=[{"function": {"index": 0, "name": "f", "arguments": {}}}]),
        chunk(tool_calls=[{"function": {"index": 1, "name": "f", "arguments": {}}}]),
        chunk(tool_calls=[{"id": "chatcmpl-tool-9f8e", "function": {"name": "g"}}]),
        final(),
    )
    calls = _calls(await chat())
    assert len(calls) == 3
    assert calls[0].id
    assert calls[1].id
    assert calls[0].id != calls[1].id
    assert calls[2].id == "chatcmpl-tool-9f8e"


async def test_trap_03_the_id_goes_back_as_tool_call_id(
    reply: Any, chat: Any, sent: Sent, final: Chunk
) -> None:
    reply(final("ok"))
    call = ollm.ToolCall("chatcmpl-tool-9f8e", "f", {})
    await chat(
        messages=(
            ollm.Message.user("go"),
            ollm.Message.assistant(tool_calls=(call,)),
            ollm.Message.tool("result", call=call),
        )
    )
    assistant, tool = sent()[0]["messages"][1:]
    assert assistant["tool_calls"][0]["id"] == "chatcmpl-tool-9f8e"
    assert tool["tool_call_id"] == "chatcmpl-tool-9f8e"


async def test_trap_04_calls_are_never_merged_by_index(
    reply: Any, chat: Any, chunk: Chunk, final: Chunk
) -> None:
    """Trap 4 (ollama#16212): every call may say index 0; each entry is a whole call."""
    reply(
        chunk(
            tool_calls=[
                {"id": "a", "function": {"index": 0, "name": "read", "arguments": {"p": "1"}}},
                {"id": "b", "function": {"index": 0, "name": "read", "arguments": {"p": "2"}}},
            ]
        ),
        chunk(tool_calls=[{"id": "c", "function": {"name": "read", "arguments": {"p": "3"}}}]),
        final(),
    )
    calls = _calls(await chat())
    assert [(c.id, c.args["p"]) for c in calls] == [("a", "1"), ("b", "2"), ("c", "3")]


async def test_trap_05_calls_on_the_done_chunk_are_read(
    reply: Any, chat: Any, final: Chunk
) -> None:
    """Trap 5: the native llama-server path sends every call on the `done:true` chunk."""
    reply(
        final(
            "Let me check.",
            tool_calls=[{"id": "x", "function": {"name": "weather", "arguments": {"c": "Oslo"}}}],
        )
    )
    events = await chat()
    assert [type(e) for e in events] == [ollm.TextEvent, ollm.ToolCallEvent, ollm.FinishEvent]
    assert _calls(events)[0].args == {"c": "Oslo"}


async def test_trap_05_calls_on_an_earlier_chunk_are_read(
    reply: Any, chat: Any, chunk: Chunk, final: Chunk
) -> None:
    """Trap 5: the template path sends calls on a `done:false` chunk, then an empty end."""
    reply(
        chunk(tool_calls=[{"function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}}]),
        final(""),
    )
    events = await chat()
    assert [type(e) for e in events] == [ollm.ToolCallEvent, ollm.FinishEvent]


async def test_trap_06_done_reason_stop_with_tool_calls_and_length(
    reply: Any, chat: Any, final: Chunk
) -> None:
    """Trap 6: no `tool_calls` finish reason; `stop` when tools were called."""
    reply(final(tool_calls=[{"function": {"name": "f"}}], done_reason="stop"))
    reply(final("cut", done_reason="length"))
    reply(final("old server"))  # no done_reason at all
    assert _finish(await chat()).reason == "stop"
    assert _finish(await chat()).reason == "length"
    events = await chat()
    assert _finish(events).reason == "stop"


async def test_trap_07_tool_results_use_tool_name_not_name(
    reply: Any, chat: Any, sent: Sent, final: Chunk
) -> None:
    """Trap 7: `role:"tool"` with `tool_name` (and `tool_call_id`); `name` is ignored."""
    reply(final("ok"))
    call = ollm.ToolCall("call_p7o2gz50", "get_temperature", {"city": "New York"})
    await chat(
        messages=(
            ollm.Message.user("?"),
            ollm.Message.assistant(tool_calls=(call,)),
            ollm.Message.tool("22°C", call=call),
        )
    )
    tool = sent()[0]["messages"][2]
    assert tool == {
        "role": "tool",
        "content": "22°C",
        "tool_name": "get_temperature",
        "tool_call_id": "call_p7o2gz50",
    }


async def test_trap_08_thinking_streams_by_default_and_goes_back_in_history(
    reply: Any, chat: Any, sent: Sent, chunk: Chunk, final: Chunk
) -> None:
    """Trap 8: `thinking` is its own field, on by default, and sent back on history turns."""
    reply(chunk(thinking="Okay, the user"), chunk(thinking=" wants"), chunk("Hi"), final())
    events = await chat()
    assert [e.text for e in events if isinstance(e, ollm.ThinkingEvent)] == [
        "Okay, the user",
        " wants",
    ]
    assert "think" not in sent()[0]  # left out: the server decides

    reply(final("again"))
    await chat(
        messages=(
            ollm.Message.user("hi"),
            ollm.Message.assistant("Hi", thinking="Okay, the user wants"),
            ollm.Message.user("again"),
        ),
        think=False,
    )
    body = sent()[1]
    assert body["think"] is False  # false is sent, not dropped
    assert body["messages"][1]["thinking"] == "Okay, the user wants"


async def test_trap_08_think_on_a_model_without_it_says_what_to_do(reply: Any, chat: Any) -> None:
    """Trap 8: `think:true` on a model without the capability is a 400."""
    reply(body=b'{"error":"\\"gemma3\\" does not support thinking"}', status=400)
    error = _error(await chat(model="gemma3", think=True))
    assert error.code == "INVALID_REQUEST"
    assert "does not support thinking" in error.message
    assert "no --think" in error.message


async def test_trap_09_images_are_raw_base64_and_content_a_string(
    reply: Any, chat: Any, sent: Sent, final: Chunk
) -> None:
    """Trap 9: no data URI, no content parts; text parts join into one string."""
    reply(final("a cat"))
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    image = ollm.ImagePart.from_base64(
        "data:image/png;base64," + base64.b64encode(png).decode(), "image/png"
    )
    message = ollm.Message(
        role="user", parts=(ollm.TextPart("what is "), image, ollm.TextPart("in this image?"))
    )
    await chat(messages=(message,))
    wire = sent()[0]["messages"][0]
    assert wire["content"] == "what is in this image?"
    assert wire["images"] == [base64.b64encode(png).decode()]
    assert not wire["images"][0].startswith("data:")


async def test_trap_10_options_inside_options_with_ollama_names(
    reply: Any, chat: Any, sent: Sent, final: Chunk
) -> None:
    """Trap 10: num_predict (not max_tokens), num_ctx, stop as a list, all in `options`."""
    reply(final("x"))
    options = ollm.GenerationOptions(
        temperature=0.2,
        max_tokens=256,
        top_p=0.9,
        top_k=40,
        repeat_penalty=1.1,
        seed=42,
        context_window=8192,
    )
    await chat(options=options)
    body = sent()[0]
    assert body["options"] == {
        "temperature": 0.2,
        "num_predict": 256,
        "top_p": 0.9,
        "top_k": 40,
        "repeat_penalty": 1.1,
        "seed": 42,
        "num_ctx": 8192,
    }
    assert not {"max_tokens", "temperature", "seed", "num_ctx"} & set(body)


async def test_trap_10_a_stop_string_goes_as_a_list(
    ollama_mock: HTTPXMock, reply: Any, chat: Any, sent: Sent, final: Chunk
) -> None:
    """Trap 10: `"stop": "\\n"` gives HTTP 500; a single string becomes a list."""
    ollama_mock.add_response(method="POST", url=f"{HOST}/api/show", json={"parameters": ""})
    reply(final("x"))
    await chat(options=ollm.GenerationOptions(stop="\nUser:"))  # type: ignore[arg-type]
    assert sent()[0]["options"]["stop"] == ["\nUser:"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [("-1", -1), ("300", 300), ("1.5", 1.5), ("10m", "10m"), (0, 0), (-1, -1), ("1h30m", "1h30m")],
)
async def test_trap_11_keep_alive_numbers_are_seconds_strings_are_durations(
    ollama_mock: HTTPXMock, final: Chunk, given: str | int, expected: str | int | float
) -> None:
    """Trap 11: the string "-1" is no Go duration: it is sent as the number -1."""
    ollama_mock.add_response(
        method="POST",
        url=f"{HOST}/api/chat",
        content=json.dumps(final("x")).encode() + b"\n",
    )
    async with OllamaProvider(HOST, keep_alive=given, http="httpx", environ={}) as provider:
        request = ollm.ProviderRequest("llama3.2", (ollm.Message.user("hi"),))
        events = [e async for e in provider.chat_stream(request)]
    assert isinstance(events[-1], ollm.FinishEvent)
    body = json.loads(ollama_mock.get_requests(url=f"{HOST}/api/chat")[0].content)
    assert body["keep_alive"] == expected
    assert type(body["keep_alive"]) is type(expected)


async def test_trap_12_empty_200_bodies_are_not_decoded(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    """Trap 12: delete and copy answer 200 with an empty body."""
    httpx_mock.add_response(method="DELETE", url=f"{HOST}/api/delete", content=b"")
    httpx_mock.add_response(method="POST", url=f"{HOST}/api/copy", content=b"")
    await provider.delete_model("llama3.2")
    await provider.copy_model("llama3.2", "llama3-backup")
    delete, copy = httpx_mock.get_requests()
    assert json.loads(delete.content) == {"model": "llama3.2"}
    assert json.loads(copy.content) == {"source": "llama3.2", "destination": "llama3-backup"}


@pytest.mark.parametrize(
    "body",
    [
        b'{"error":"model \'llama9\' not found"}',
        b'{"error":"model \\"llama9\\" not found, try pulling it first"}',
        b'{"error":"no such model, whatever the wording"}',
    ],
)
async def test_trap_13_a_404_is_a_missing_model_whatever_the_text(
    reply: Any, chat: Any, body: bytes
) -> None:
    """Trap 13: error text and quoting differ by route: match on the status."""
    reply(body=body, status=404)
    error = _error(await chat(model="llama9"))
    assert error.code == "MODEL_NOT_FOUND"
    assert "ollm models pull llama9" in error.message


async def test_trap_14_an_error_line_in_a_200_stream(reply: Any, chat: Any, chunk: Chunk) -> None:
    """Trap 14: a mid-stream `{"error": ...}` line on a 200 response."""
    reply(chunk("I"), {"error": "an error was encountered while running the model"})
    events = await chat()
    assert isinstance(events[0], ollm.TextEvent)
    error = _error(events)
    assert error.code == "PROVIDER_ERROR"
    assert "an error was encountered while running the model" in error.message


async def test_trap_14_a_stream_that_ends_without_done(reply: Any, chat: Any, chunk: Chunk) -> None:
    """Trap 14: EOF before `done:true` is an error, not a normal end."""
    reply(chunk("The"), chunk(" sky"))
    events = await chat()
    assert [e.text for e in events if isinstance(e, ollm.TextEvent)] == ["The", " sky"]
    error = _error(events)
    assert error.code == "STREAM_INTERRUPTED"
    assert not any(isinstance(e, ollm.FinishEvent) for e in events)


async def test_trap_15_names_the_server_normalizes_still_match(
    httpx_mock: HTTPXMock, provider: OllamaProvider, final: Chunk
) -> None:
    """Trap 15: `/api/ps` says `llama3.2:latest` for a request that said `llama3.2`."""
    httpx_mock.add_response(
        method="GET",
        url=f"{HOST}/api/ps",
        json={"models": [{"name": "llama3.2:latest", "model": "llama3.2:latest"}]},
    )
    httpx_mock.add_response(
        method="POST", url=f"{HOST}/api/chat", content=json.dumps(final("hi")).encode()
    )
    request = ollm.ProviderRequest("llama3.2", (ollm.Message.user("hi"),))
    events = [e async for e in provider.chat_stream(request)]
    assert not any(isinstance(e, ollm.NoticeEvent) for e in events)  # it is loaded


async def test_trap_16_absent_fields_are_not_errors(reply: Any, chat: Any) -> None:
    """Trap 16: metrics, `done_reason`, even `message` may be absent."""
    reply({"model": "llama3.2", "message": {"role": "assistant", "content": "hi"}}, {"done": True})
    events = await chat()
    assert isinstance(events[0], ollm.TextEvent)
    finish = _finish(events)
    assert finish.reason == "stop"
    assert finish.usage == ollm.Usage()


async def test_trap_17_trained_context_is_not_the_runtime_window(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    """Trap 17: `<arch>.context_length` is the trained maximum; `/api/ps` has the real one."""
    show = {
        "parameters": 'stop "<|eot_id|>"',
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        "capabilities": ["completion", "tools"],
    }
    httpx_mock.add_response(method="POST", url=f"{HOST}/api/show", json=show, is_reusable=True)
    httpx_mock.add_response(
        method="GET",
        url=f"{HOST}/api/ps",
        json={"models": [{"name": "llama3.2:latest", "context_length": 4096}]},
    )
    info = await provider.show_model("llama3.2")
    assert info.details["context_length"] == 131072
    capabilities = await provider.model_capabilities("llama3.2")
    assert capabilities.context_window == 4096


async def test_trap_18_an_empty_403_explains_the_host_check(reply: Any, chat: Any) -> None:
    """Trap 18: a proxy or tunnel with a non-local Host gets 403 and an empty body."""
    reply(body=b"", status=403)
    error = _error(await chat())
    assert error.code == "PROVIDER_ERROR"
    for needed in ("403", "Host", "127.0.0.1", "OLLAMA_HOST", "OLLAMA_ORIGINS"):
        assert needed in error.message
