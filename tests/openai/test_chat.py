"""End to end: ChatClient + OpenAIProvider against the fake server's replay of each engine."""

from __future__ import annotations

import time

import anyio
import pytest

import ollm
from ollm_openai import OpenAIProvider
from ollm_testutils import FakeOpenAIServer, OpenAIReply, OpenAIToolCall
from ollm_testutils.fake_openai import FLAVORS

from .conftest import MODEL, Run, Stream, chat_events, client_for, error_of, text_of

pytestmark = pytest.mark.anyio

CITIES = {"Paris": 18, "Oslo": -3}


@ollm.tool
def get_temperature(city: str) -> str:
    """Get the current temperature for a city.

    Args:
        city: The name of the city.
    """
    return f"{CITIES[city]}°C"


async def test_text_streams_and_the_history_keeps_it(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    server.script(OpenAIReply(["Hel", "lo", " there"]))
    client = client_for(provider, system="Be brief.")
    events = await chat_events(client, "hi")
    texts = [e.text for e in events if isinstance(e, ollm.TextEvent)]
    assert texts == ["Hel", "lo", " there"]
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.reason == "stop"
    assert finish.usage is not None
    assert finish.usage.prompt_tokens > 0
    body = server.chat_requests[0].json
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "tools" not in body
    assert "tool_choice" not in body
    assert client.conversation.messages[-1].text == "Hello there"


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_tool_calls_from_every_engine_run_and_answer(flavor: str, http_stack: str) -> None:
    async with FakeOpenAIServer(flavor=flavor) as server:  # type: ignore[arg-type]
        server.script(
            OpenAIReply(
                ["Checking."],
                tool_calls=[
                    ("get_temperature", {"city": "Paris"}),
                    ("get_temperature", {"city": "Oslo"}),
                ],
            ),
            OpenAIReply(["Paris 18°C, Oslo -3°C."]),
        )
        async with OpenAIProvider(server.base_url, model=MODEL, http=http_stack, environ={}) as p:
            client = client_for(p, tools=[get_temperature])
            events = await chat_events(client, "Temperatures?")
        results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
        assert [(r.call.args, r.result, r.is_error) for r in results] == [
            ({"city": "Paris"}, "18°C", False),
            ({"city": "Oslo"}, "-3°C", False),
        ]
        assert text_of(events).endswith("Paris 18°C, Oslo -3°C.")
        assert isinstance(events[-1], ollm.FinishEvent)
        assert events[-1].reason == "stop"
        first, second = server.chat_requests
        assert first.json["tools"] == [
            {
                "type": "function",
                "function": {
                    "name": "get_temperature",
                    "parameters": get_temperature.schema.parameters,
                    "description": get_temperature.schema.description,
                },
            }
        ]
        assert first.json["tool_choice"] == "auto"
        assistant, tool_a, tool_b = second.json["messages"][1:4]
        ids = [call["id"] for call in assistant["tool_calls"]]
        assert len(set(ids)) == 2
        assert all(ids)
        assert [json_args(c) for c in assistant["tool_calls"]] == [
            {"city": "Paris"},
            {"city": "Oslo"},
        ]
        assert all(isinstance(c["function"]["arguments"], str) for c in assistant["tool_calls"])
        assert (tool_a["role"], tool_a["tool_call_id"], tool_a["content"]) == (
            "tool",
            ids[0],
            "18°C",
        )
        assert (tool_b["tool_call_id"], tool_b["content"]) == (ids[1], "-3°C")


def json_args(call: dict[str, object]) -> object:
    import json

    function = call["function"]
    assert isinstance(function, dict)
    return json.loads(function["arguments"])


async def test_interleaved_parallel_calls_assemble(
    server: FakeOpenAIServer, provider: OpenAIProvider, stream: Stream
) -> None:
    calls = [("get_temperature", {"city": "Paris"}), ("lookup", {"q": "a long query, split"})]
    server.script(OpenAIReply(tool_calls=calls, tool_call_framing="interleaved"))
    events = await stream("go", tools=(get_temperature.schema,))
    got = [(e.call.name, e.call.args) for e in events if isinstance(e, ollm.ToolCallEvent)]
    assert got == calls


async def test_arguments_that_do_not_parse_go_back_to_the_model(
    server: FakeOpenAIServer, run: Run
) -> None:
    server.script(
        OpenAIReply(tool_calls=[OpenAIToolCall("get_temperature", '{"city": "Par')]),
        OpenAIReply(tool_calls=[("get_temperature", {"city": "Paris"})]),
        OpenAIReply(["18°C in Paris."]),
    )
    events = await run("Paris?", tools=[get_temperature])
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [(r.is_error, r.error_code) for r in results] == [
        (True, "INVALID_ARGUMENTS"),
        (False, None),
    ]
    assert "not a JSON object" in results[0].result
    assert '{"city": "Par' in results[0].result
    assert not any(isinstance(e, ollm.ErrorEvent) for e in events)
    # The model read why, as the result of its call.
    tool_message = server.chat_requests[1].json["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "not a JSON object" in tool_message["content"]


async def test_reasoning_arrives_as_thinking() -> None:
    for flavor, field in (("vllm", "reasoning_content"), ("ollama", "reasoning")):
        async with FakeOpenAIServer(flavor=flavor) as server:  # type: ignore[arg-type]
            server.script(OpenAIReply(["4"], reasoning=["2+2", " is 4"]))
            async with OpenAIProvider(server.base_url, model=MODEL, environ={}) as provider:
                result = await client_for(provider).run("2+2?")
        assert result.text == "4"
        assert result.messages[-1].thinking == "2+2 is 4", field


async def test_finish_stop_with_calls_and_no_ids_lm_studio(stream: Stream) -> None:
    async with FakeOpenAIServer(flavor="lmstudio") as server:
        server.script(OpenAIReply(tool_calls=[("a", {"x": 1}), ("b", {})], finish_reason="stop"))
        async with OpenAIProvider(server.base_url, model=MODEL, environ={}) as provider:
            events = [e async for e in provider.chat_stream(_request())]
    calls = [e.call for e in events if isinstance(e, ollm.ToolCallEvent)]
    assert [(c.name, c.args) for c in calls] == [("a", {"x": 1}), ("b", {})]
    assert all(c.id for c in calls)
    assert calls[0].id != calls[1].id


def _request(**fields: object) -> ollm.ProviderRequest:
    return ollm.ProviderRequest(model=MODEL, messages=(ollm.Message.user("hi"),), **fields)  # type: ignore[arg-type]


async def test_a_reply_without_done_but_finished_is_complete(
    server: FakeOpenAIServer, stream: Stream
) -> None:
    server.script(OpenAIReply(["ok"], end="no_done"))
    events = await stream()
    assert text_of(events) == "ok"
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "stop"


async def test_a_broken_stream_keeps_the_partial_reply(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    server.script(OpenAIReply(["The answer", " is"], end="cut"), OpenAIReply(["Again: 42."]))
    client = client_for(provider)
    events = await chat_events(client, "question")
    assert error_of(events).code == "STREAM_INTERRUPTED"
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "error"
    last = client.conversation.messages[-1]
    assert (last.role, last.text, last.incomplete) == ("assistant", "The answer is", True)
    # The conversation goes on.
    again = await chat_events(client, "again")
    assert text_of(again) == "Again: 42."


async def test_an_error_in_the_middle_of_the_stream(
    server: FakeOpenAIServer, stream: Stream
) -> None:
    server.script(
        OpenAIReply(["Par"], midstream_error={"message": "CUDA out of memory", "code": 500})
    )
    events = await stream()
    error = error_of(events)
    assert error.code == "PROVIDER_ERROR"
    assert "CUDA out of memory" in error.message
    assert "in the middle" in error.message


async def test_whole_replies_when_streaming_is_off(server: FakeOpenAIServer) -> None:
    server.script(OpenAIReply(["Hello ", "there"], reasoning="hmm", tool_calls=[("f", {"a": 1})]))
    async with OpenAIProvider(server.base_url, model=MODEL, stream=False, environ={}) as provider:
        events = [e async for e in provider.chat_stream(_request())]
    assert [type(e).__name__ for e in events] == [
        "ThinkingEvent",
        "TextEvent",
        "ToolCallEvent",
        "FinishEvent",
    ]
    assert text_of(events) == "Hello there"
    body = server.chat_requests[0].json
    assert "stream" not in body
    assert "stream_options" not in body
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.usage is not None


async def test_length_and_content_filter(server: FakeOpenAIServer, stream: Stream) -> None:
    server.script(OpenAIReply(["cut sh"], finish_reason="length"))
    events = await stream()
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "length"
    server.script(OpenAIReply(["I"], finish_reason="content_filter"))
    events = await stream()
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent)]
    assert [n.kind for n in notices] == ["content_filter"]
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "stop"


async def test_a_refusal_is_shown(server: FakeOpenAIServer, stream: Stream) -> None:
    server.script(OpenAIReply(refusal="I can't help with that."))
    assert text_of(await stream()) == "I can't help with that."


async def test_a_server_that_refuses_stream_options_is_asked_again_once(
    server: FakeOpenAIServer, provider: OpenAIProvider, stream: Stream
) -> None:
    server.accepts_stream_options = False
    first = await stream()
    second = await stream()
    assert text_of(first) == text_of(second) == "Hello! How can I help?"
    sent = [r.json.get("stream_options") for r in server.chat_requests]
    # Refused once, sent again without it, and never again while the provider lives.
    assert sent == [{"include_usage": True}, None, None]


async def test_max_tokens_follows_the_server(server: FakeOpenAIServer, stream: Stream) -> None:
    server.accepts_max_tokens = False
    options = ollm.GenerationOptions(max_tokens=50)
    await stream(options=options)
    await stream(options=options)
    bodies = [r.json for r in server.chat_requests]
    assert [("max_tokens" in b, b.get("max_completion_tokens")) for b in bodies] == [
        (True, None),
        (False, 50),
        (False, 50),
    ]


async def test_abort_stops_a_hanging_reply_at_once(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    server.script(OpenAIReply(["Thinking"], hang=True))
    client = client_for(provider)
    events: list[ollm.ChatEvent] = []
    started = time.monotonic()
    async with client.chat("go") as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ollm.TextEvent):
                stream.abort()
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "cancelled"
    last = client.conversation.messages[-1]
    assert (last.text, last.incomplete) == ("Thinking", True)
    assert time.monotonic() - started < 30  # a hang would be stopped by the test's timeout
    with anyio.fail_after(10):
        while server.requests[-1:] and server.requests[-1].completed:
            await anyio.sleep(0.01)
    assert server.requests[-1].completed is False  # the server saw the client leave


async def test_the_connection_is_reused(
    server: FakeOpenAIServer, provider: OpenAIProvider, stream: Stream
) -> None:
    for _ in range(5):
        assert text_of(await stream()) == "Hello! How can I help?"
    assert server.connections_accepted == 1


async def test_a_body_that_ends_cleanly_before_the_reply_is_done(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    # No finish_reason, no [DONE]: the body's end comes early (a proxy's timeout).
    server.script(OpenAIReply(raw=[b'data: {"choices": [{"delta": {"content": "Half"}}]}\n\n']))
    client = client_for(provider)
    events = await chat_events(client, "q")
    assert error_of(events).code == "STREAM_INTERRUPTED"
    last = client.conversation.messages[-1]
    assert (last.text, last.incomplete) == ("Half", True)
