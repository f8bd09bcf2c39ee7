"""What a real OpenAI-compatible server (llama-cpp-python's) showed that fakes had not
(issue 41), each replayed by a switch of the fake server: typed output on a server
without ``json_schema``, one-line errors, the tool round trip's ``content`` and
``tool_choice``, option names per engine, usage the server never sends."""

from __future__ import annotations

import msgspec
import pytest

import ollm
from ollm_openai import OpenAIProvider
from ollm_testutils import FakeOpenAIServer, OpenAIReply

from .conftest import (
    MODEL,
    chat_events,
    client_for,
    error_of,
    provider_events,
    request_for,
    text_of,
)

pytestmark = pytest.mark.anyio


@ollm.tool
def ping() -> str:
    """Answer pong."""
    return "pong"


# -- typed output's ladder: json_schema, json_object, prompted (item 1) -------------------


class City(msgspec.Struct):
    name: str
    people: int


VALUE = '{"name": "Oslo", "people": 709000}'


def formats(server: FakeOpenAIServer) -> list[object]:
    return [(r.json.get("response_format") or {}).get("type", "none") for r in server.chat_requests]


async def test_typed_output_falls_back_to_json_object_at_once_and_remembers(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    server.accepts_json_schema = False  # llama-cpp-python: 500 on json_schema
    server.default_reply = OpenAIReply([VALUE])
    client = client_for(provider)
    events = await chat_events(client, "Oslo?", output=City, output_retries=0)
    outputs = [e for e in events if isinstance(e, ollm.OutputEvent)]
    assert [o.value for o in outputs] == [City("Oslo", 709000)], events
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent)]
    assert [n.kind for n in notices] == ["format_fallback"]
    assert "json_object" in notices[0].message
    assert "\n" not in notices[0].message
    # Sent again at once with the next rung: no HTTP retry, no correction spent.
    assert formats(server) == ["json_schema", "json_object"]
    assert "JSON Schema" in server.chat_requests[1].json["messages"][0]["content"]
    # Remembered for the server and model: the next chat asks json_object first, quietly.
    again = await chat_events(client, "Bergen?", output=City, output_retries=0)
    assert not [e for e in again if isinstance(e, ollm.NoticeEvent)]
    assert formats(server) == ["json_schema", "json_object", "json_object"]


async def test_a_server_that_refuses_both_gets_the_schema_in_the_prompt_alone(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    refusal = 'response_format type must be one of "text" or "json_object", but got: %s'
    server.script(
        OpenAIReply.failure(400, refusal % "json_schema", type="invalid_request_error"),
        OpenAIReply.failure(400, refusal % "json_object", type="invalid_request_error"),
        OpenAIReply([VALUE]),
        OpenAIReply([VALUE]),
    )
    client = client_for(provider)
    value = await client.run("Oslo?", output=City, output_retries=0)
    assert value == City("Oslo", 709000)
    assert formats(server) == ["json_schema", "json_object", "none"]
    assert "JSON Schema" in server.chat_requests[2].json["messages"][0]["content"]
    await client.run("Oslo?", output=City, output_retries=0)
    assert formats(server)[3:] == ["none"]


async def test_a_refusal_that_names_no_format_is_an_error_as_before(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    server.script(OpenAIReply.failure(400, "temperature must be at most 2", type="invalid"))
    events = await chat_events(client_for(provider), "Oslo?", output=City)
    assert error_of(events).code == "INVALID_REQUEST"
    assert formats(server) == ["json_schema"]


# -- the tool round trip (item 5) -------------------------------------------------------


async def test_the_follow_up_sends_the_assistant_content_as_a_string(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    server.accepts_content_null = False  # llama-cpp-python: 500 on "content": null
    server.script(OpenAIReply(tool_calls=[("ping", {})]), OpenAIReply(["done"]))
    events = await chat_events(client_for(provider, tools=[ping]), "ping it")
    assert not [e for e in events if isinstance(e, ollm.ErrorEvent)], events
    assert text_of(events) == "done"
    assistant = server.chat_requests[1].json["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == ""
    assert assistant["tool_calls"][0]["function"]["name"] == "ping"


@pytest.mark.parametrize(
    ("choice", "sent"),
    [("ping", {"type": "function", "function": {"name": "ping"}}), ("required", "required")],
)
async def test_a_forced_tool_choice_goes_on_the_first_request_only(
    server: FakeOpenAIServer, provider: OpenAIProvider, choice: str, sent: object
) -> None:
    server.honours_tool_choice = True  # a forced choice is obeyed: forcing it again loops
    client = client_for(provider, tools=[ping], max_turns=5)
    events = await chat_events(client, "ping it", tool_choice=choice)
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.reason == "stop", events
    choices = [request.json["tool_choice"] for request in server.chat_requests]
    assert choices == [sent, "auto"]
    # The next chat forces it again: the rule is per chat, not per client.
    await chat_events(client, "again", tool_choice=choice)
    assert [r.json["tool_choice"] for r in server.chat_requests[2:]] == [sent, "auto"]


# -- one-line errors (item 2) -----------------------------------------------------------

DUMP = (
    "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'messages', 0, 'content'), "
    "'msg': 'Field required', 'input': {'role': 'user'}}\n\n  File "
    '"/srv/llama_cpp/server/app.py", line 376, in create_chat_completion\n'
    "    POST /v1/chat/completions\n"
)


async def test_a_multi_line_error_is_one_line(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    server.script(OpenAIReply.failure(422, DUMP, type="invalid_request_error"))
    events = await chat_events(client_for(provider), "hi")
    error = error_of(events)
    assert error.code == "INVALID_REQUEST"
    assert "\n" not in error.message
    assert "body.messages.0.content: Field required" in error.message
    assert "app.py" not in error.message


async def test_a_plain_text_traceback_is_its_exception_line(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/srv/server.py", line 12, in handle\n'
        "    return render(request)\n"
        "RuntimeError: the model is still loading\n"
    )
    server.script(OpenAIReply(status=400, error=trace))  # {"error": "Traceback..."}
    error = error_of(await chat_events(client_for(provider), "hi"))
    assert "\n" not in error.message
    assert "RuntimeError: the model is still loading" in error.message
    assert "server.py" not in error.message


# -- usage the server never sends (item 7) ----------------------------------------------


async def test_a_server_without_usage_gets_ollms_own_count_marked_estimated(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    server.sends_usage = False  # llama-cpp-python ignores stream_options.include_usage
    server.script(OpenAIReply(["Hello", " there, friend"]))  # 18 characters: 5 tokens
    request = request_for("How are you today?")
    events = await provider_events(provider, request)
    assert "stream_options" in server.chat_requests[0].json  # it was asked for
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.usage is not None
    assert finish.usage.estimated
    assert finish.usage.prompt_tokens == await provider.count_tokens(request)
    assert finish.usage.completion_tokens == 5
    assert finish.usage.total_tokens == finish.usage.prompt_tokens + 5


async def test_a_chat_sums_estimated_turns_as_estimated(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    server.sends_usage = False
    server.script(OpenAIReply(tool_calls=[("ping", {})]), OpenAIReply(["done"]))
    events = await chat_events(client_for(provider, tools=[ping]), "ping it")
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.usage is not None
    assert finish.usage.estimated
    assert finish.usage.completion_tokens >= 2  # the call's "{}" and "done"


async def test_usage_the_server_counted_is_not_estimated(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    server.script(OpenAIReply(["ok"], usage=(12, 3)))
    finish = (await provider_events(provider, request_for()))[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.usage == ollm.Usage(prompt_tokens=12, completion_tokens=3, total_tokens=15)
    assert finish.usage is not None
    assert not finish.usage.estimated
    assert "estimated" not in msgspec.json.encode(finish).decode()  # as before, on the wire


# -- option names per engine (item 6) ---------------------------------------------------

# Every field of OpenAI's Chat Completions request that ollm may send.
OPENAI_FIELDS = {
    "model",
    "messages",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "max_tokens",
    "max_completion_tokens",
    "response_format",
    "reasoning_effort",
    "user",
}
PENALTY = ollm.GenerationOptions(repeat_penalty=1.3, top_k=20, temperature=0.5)


@pytest.mark.parametrize(
    ("flavor", "name"),
    [
        ("llamacpp", "repeat_penalty"),  # owned_by "llamacpp" (llama-cpp-python: "me")
        ("vllm", "repetition_penalty"),
        ("sglang", "repetition_penalty"),
        ("openai", "repetition_penalty"),  # says nothing of itself: vLLM's name
    ],
)
async def test_repeat_penalty_goes_by_the_name_the_detected_engine_takes(
    flavor: str, name: str
) -> None:
    with FakeOpenAIServer(flavor=flavor) as server:  # type: ignore[arg-type]
        async with OpenAIProvider(server.base_url, model=MODEL, environ={}) as provider:
            for _ in range(2):
                events = await provider_events(provider, request_for(options=PENALTY))
                assert not [e for e in events if isinstance(e, ollm.NoticeEvent)]
        bodies = [r.json for r in server.chat_requests]
        detections = [r for r in server.requests if r.path == "/v1/models"]
    for body in bodies:
        assert body[name] == 1.3
        assert body["top_k"] == 20
        other = {"repeat_penalty", "repetition_penalty"} - {name}
        assert not other & body.keys()
    assert len(detections) == 1  # detected once, for the provider's life


@pytest.mark.parametrize("engine", ["llamacpp", "vllm"])
async def test_a_profile_engine_wins_over_detection(engine: str) -> None:
    with FakeOpenAIServer(flavor="sglang") as server:
        async with OpenAIProvider(
            server.base_url,
            model=MODEL,
            environ={},
            engine=engine,  # type: ignore[arg-type]
        ) as provider:
            await provider_events(provider, request_for(options=PENALTY))
        body = server.chat_requests[0].json
    expected = "repeat_penalty" if engine == "llamacpp" else "repetition_penalty"
    assert body[expected] == 1.3
    assert not [r for r in server.requests if r.path == "/v1/models"]


async def test_openai_itself_gets_no_unknown_field_and_one_notice() -> None:
    with FakeOpenAIServer() as server:
        async with OpenAIProvider(
            server.base_url, model=MODEL, environ={}, engine="openai"
        ) as provider:
            first = await provider_events(
                provider, request_for(options=PENALTY, think=False, response_format="json")
            )
            second = await provider_events(provider, request_for(options=PENALTY))
        bodies = [r.json for r in server.chat_requests]
    notices = [e for e in first if isinstance(e, ollm.NoticeEvent)]
    assert [n.kind for n in notices] == ["option_ignored"]
    assert "repeat_penalty" in notices[0].message
    assert "top_k" in notices[0].message
    assert not [e for e in second if isinstance(e, ollm.NoticeEvent)]
    for body in bodies:
        assert body.keys() <= OPENAI_FIELDS, body.keys() - OPENAI_FIELDS
        assert body["temperature"] == 0.5


async def test_ollamas_v1_gets_no_repeat_penalty_and_a_notice() -> None:
    with FakeOpenAIServer(flavor="ollama") as server:
        async with OpenAIProvider(server.base_url, model=MODEL, environ={}) as provider:
            events = await provider_events(provider, request_for(options=PENALTY))
        body = server.chat_requests[0].json
    assert not {"repeat_penalty", "repetition_penalty"} & body.keys()
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent)]
    assert [n.kind for n in notices] == ["option_ignored"]
    assert "-p ollama" in notices[0].message


def test_an_unknown_engine_is_refused_in_words() -> None:
    with pytest.raises(ollm.InvalidRequestError, match="engine='tgi' is not an engine"):
        OpenAIProvider("http://127.0.0.1:1/v1", environ={}, engine="tgi")  # type: ignore[arg-type]


async def test_llama_cpp_gets_the_schema_inside_json_object() -> None:
    """llama-cpp-python and llama-server constrain json_object to its `schema` member."""
    with FakeOpenAIServer(flavor="llamacpp") as server:
        server.accepts_json_schema = False
        server.default_reply = OpenAIReply([VALUE])
        async with OpenAIProvider(server.base_url, model=MODEL, environ={}) as provider:
            value = await client_for(provider).run("Oslo?", output=City, output_retries=0)
        sent = [r.json["response_format"] for r in server.chat_requests]
    assert value == City("Oslo", 709000)
    assert sent[1]["type"] == "json_object"
    assert sent[1]["schema"] == sent[0]["json_schema"]["schema"]
