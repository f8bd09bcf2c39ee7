"""The official openai SDK against ollm serve: async in-process, sync on a real uvicorn;
streamed and not; tools; response_format; errors in OpenAI's shape."""

from __future__ import annotations

import json

import openai
import pydantic
import pytest

import ollm
from ollm_serve import ServeApp, create_app, running
from ollm_testutils import Reply, ScriptedProvider

from .conftest import KEY, asgi_client, make_app

pytestmark = pytest.mark.anyio

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    },
]


def sdk(app: ServeApp, key: str = "unused") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://serve/v1", api_key=key, http_client=asgi_client(app), max_retries=0
    )


async def test_a_reply_not_streamed(app: ServeApp, scripted: ScriptedProvider) -> None:
    scripted.add(Reply(["Hello", " there"], usage=ollm.Usage(5, 2, 7)))
    client = sdk(app)
    reply = await client.chat.completions.create(
        model="mock-model",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        temperature=0.2,
        top_p=0.9,
        max_completion_tokens=50,
        stop=["END"],
        seed=7,
    )
    assert reply.choices[0].message.content == "Hello there"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert reply.usage.total_tokens == 7
    sent = scripted.requests[0]
    assert sent.system_prompt == "Be brief."
    assert sent.options.temperature == 0.2
    assert sent.options.top_p == 0.9
    assert sent.options.max_tokens == 50
    assert sent.options.seed == 7
    assert sent.options.stop == ("END",)


async def test_a_streamed_reply_with_usage(app: ServeApp, scripted: ScriptedProvider) -> None:
    scripted.add(Reply(["Hel", "lo"], usage=ollm.Usage(3, 2, 5)))
    client = sdk(app)
    stream = await client.chat.completions.create(
        model="mock-model",
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = [], None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(text) == "Hello"
    assert finish == "stop"
    assert usage is not None
    assert usage.total_tokens == 5


async def test_parallel_tool_calls_and_the_follow_up(
    app: ServeApp, scripted: ScriptedProvider
) -> None:
    scripted.add(
        Reply(tool_calls=[("get_weather", {"city": "Paris"}), ("get_time", {})]),
        Reply("Sunny, and it is noon."),
    )
    client = sdk(app)
    messages: list[dict[str, object]] = [{"role": "user", "content": "Weather and time?"}]
    reply = await client.chat.completions.create(
        model="mock-model",
        messages=messages,
        tools=TOOLS,
        tool_choice="auto",  # type: ignore[arg-type]
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {}),
    ]
    # The tools are the client's: nothing ran them here, and one request went upstream.
    assert len(scripted.requests) == 1
    assert [t.name for t in scripted.requests[0].tools] == ["get_weather", "get_time"]
    messages.append(choice.message.model_dump(exclude_none=True))
    messages += [
        {"role": "tool", "tool_call_id": calls[0].id, "content": "Sunny"},
        {"role": "tool", "tool_call_id": calls[1].id, "content": "12:00"},
    ]
    final = await client.chat.completions.create(model="mock-model", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    assert final.choices[0].message.content == "Sunny, and it is noon."
    history = scripted.requests[1].messages
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool"]
    assert [m.tool_call_id for m in history[2:]] == [c.id for c in calls]
    assert [m.name for m in history[2:]] == ["get_weather", "get_time"]


async def test_streamed_tool_calls(app: ServeApp, scripted: ScriptedProvider) -> None:
    scripted.add(Reply(tool_calls=[("get_weather", {"city": "Oslo"})]))
    client = sdk(app)
    stream = await client.chat.completions.create(
        model="mock-model",
        messages=[{"role": "user", "content": "Weather?"}],
        tools=TOOLS,  # type: ignore[arg-type]
        stream=True,
    )
    calls, finish = [], None
    async for chunk in stream:
        for choice in chunk.choices:
            calls += choice.delta.tool_calls or []
            finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in calls] == [
        ("get_weather", '{"city": "Oslo"}')
    ]


async def test_a_forced_tool_choice_goes_upstream(
    app: ServeApp, scripted: ScriptedProvider
) -> None:
    scripted.add(Reply(tool_calls=[("get_time", {})]))
    await sdk(app).chat.completions.create(
        model="mock-model",
        messages=[{"role": "user", "content": "Time?"}],
        tools=TOOLS,  # type: ignore[arg-type]
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    assert scripted.requests[0].tool_choice == "get_time"


async def test_a_model_without_native_tools_gives_native_tool_calls(
    registries: ollm.Registries,
) -> None:
    # ReAct: the model writes its call as text; the SDK gets a proper tool_calls reply.
    react = ScriptedProvider(
        Reply('Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}'),
        Reply("Thought: I know.\nFinal Answer: Sunny in Paris."),
        name="plain",
        capabilities=ollm.ModelCapabilities(tools=False),
    )
    registries.providers.register(react)
    app = make_app(registries, ("plain",))
    client = sdk(app)
    messages: list[dict[str, object]] = [{"role": "user", "content": "Weather in Paris?"}]
    reply = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "get_weather",
        {"city": "Paris"},
    )
    assert react.requests[0].tools == ()  # the tools went as words, not natively
    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "Sunny"})
    final = await client.chat.completions.create(model="m", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    assert final.choices[0].message.content == "Sunny in Paris."


class Weather(pydantic.BaseModel):
    city: str
    celsius: int


async def test_response_format_json_schema_validated_with_a_correction(
    app: ServeApp, scripted: ScriptedProvider
) -> None:
    scripted.add(Reply('{"city": "Paris"}'), Reply('{"city": "Paris", "celsius": 21}'))
    parsed = await sdk(app).chat.completions.parse(
        model="mock-model",
        messages=[{"role": "user", "content": "Weather in Paris as JSON"}],
        response_format=Weather,
    )
    assert parsed.choices[0].message.parsed == Weather(city="Paris", celsius=21)
    # The first answer missed a field: the runtime asked again, the client saw one answer.
    assert len(scripted.requests) == 2
    assert scripted.requests[0].response_format is not None


async def test_response_format_json_object_streamed(
    app: ServeApp, scripted: ScriptedProvider
) -> None:
    scripted.add(Reply(['{"a"', ": 1}"]))
    stream = await sdk(app).chat.completions.create(
        model="mock-model",
        messages=[{"role": "user", "content": "JSON please"}],
        response_format={"type": "json_object"},
        stream=True,
    )
    text = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert json.loads("".join(text)) == {"a": 1}


async def test_n_above_one_is_refused_in_words(app: ServeApp, scripted: ScriptedProvider) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await sdk(app).chat.completions.create(
            model="mock-model", messages=[{"role": "user", "content": "Hi"}], n=2
        )
    assert caught.value.status_code == 400
    assert "one choice per request" in caught.value.message
    assert scripted.requests == []


async def test_a_backend_error_is_openais_error_shape(
    app: ServeApp, scripted: ScriptedProvider
) -> None:
    scripted.add(Reply(error=ollm.ModelNotFoundError("model 'nope' not found. Pull it first.")))
    with pytest.raises(openai.NotFoundError) as caught:
        await sdk(app).chat.completions.create(
            model="nope", messages=[{"role": "user", "content": "Hi"}]
        )
    assert "Pull it first" in caught.value.message
    assert caught.value.code == "MODEL_NOT_FOUND"


async def test_a_wrong_key_gets_401_and_nothing_goes_upstream(
    registries: ollm.Registries, scripted: ScriptedProvider
) -> None:
    app = make_app(registries, api_keys=(KEY,))
    with pytest.raises(openai.AuthenticationError):
        await sdk(app, key="wrong-key-of-twenty-chars").chat.completions.create(
            model="mock-model", messages=[{"role": "user", "content": "Hi"}]
        )
    assert scripted.requests == []
    scripted.add(Reply("ok"))
    reply = await sdk(app, key=KEY).chat.completions.create(
        model="mock-model", messages=[{"role": "user", "content": "Hi"}]
    )
    assert reply.choices[0].message.content == "ok"


async def test_models_and_embeddings(app: ServeApp) -> None:
    client = sdk(app)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["mock-model"]
    embedded = await client.embeddings.create(model="mock-model", input=["a", "b"])
    assert [len(e.embedding) for e in embedded.data] == [3, 3]


def test_the_sync_sdk_on_a_real_server(app: ServeApp, scripted: ScriptedProvider) -> None:
    scripted.add(Reply("Hi from uvicorn"), Reply(["str", "eamed"]))
    with running(app) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        reply = client.chat.completions.create(
            model="mock-model", messages=[{"role": "user", "content": "Hi"}]
        )
        assert reply.choices[0].message.content == "Hi from uvicorn"
        stream = client.chat.completions.create(
            model="mock-model", messages=[{"role": "user", "content": "Hi"}], stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "streamed"
        client.close()


async def test_an_error_in_the_middle_of_a_stream_reaches_the_sdk(
    app: ServeApp, scripted: ScriptedProvider
) -> None:
    scripted.add(Reply.error_midstream(["Hello", " wor"]))
    stream = await sdk(app).chat.completions.create(
        model="mock-model", messages=[{"role": "user", "content": "Hi"}], stream=True
    )
    text: list[str] = []

    async def read() -> None:
        async for chunk in stream:
            text.extend(c.delta.content or "" for c in chunk.choices)

    with pytest.raises(openai.APIError) as caught:
        await read()
    assert "".join(text) == "Hello wor"
    assert "stopped in the middle" in caught.value.message


class Shout:
    """A middleware that upper-cases the reply's text."""

    def on_event(self, ctx: ollm.MiddlewareContext, event: object) -> object:
        if isinstance(event, ollm.TextEvent):
            return ollm.TextEvent(event.text.upper())
        return event


async def test_a_named_middleware_runs_around_each_served_request(
    registries: ollm.Registries, scripted: ScriptedProvider
) -> None:
    registries.middleware.register(ollm.MiddlewareSpec("shout", Shout))
    scripted.add(Reply("quiet words"))
    app = create_app(["scripted"], registries=registries, middleware=["shout"])
    reply = await sdk(app).chat.completions.create(
        model="mock-model", messages=[{"role": "user", "content": "Hi"}]
    )
    assert reply.choices[0].message.content == "QUIET WORDS"
