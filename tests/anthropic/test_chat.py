"""End to end: ChatClient + AnthropicProvider against the fake Messages API, on asyncio and trio."""

from __future__ import annotations

import base64
import json

import pytest

import ollm
from ollm_anthropic import AnthropicProvider
from ollm_testutils import AnthropicReply, AnthropicThinking, AnthropicToolUse, FakeAnthropicServer

from .conftest import (
    KEY,
    MODEL,
    Stream,
    chat_events,
    client_for,
    error_of,
    finish_of,
    provider_for,
    request_for,
    text_of,
)

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
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.script(AnthropicReply(["Hel", "lo", " there"], usage=(12, 3)))
    client = client_for(provider, system="Be brief.")
    events = await chat_events(client, "hi")
    assert [e.text for e in events if isinstance(e, ollm.TextEvent)] == ["Hel", "lo", " there"]
    finish = finish_of(events)
    assert finish.reason == "stop"
    assert finish.usage is not None
    assert (finish.usage.prompt_tokens, finish.usage.completion_tokens) == (12, 3)
    sent = server.message_requests[0]
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    body = sent.json
    assert body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["stream"] is True
    assert body["max_tokens"] == 8192  # the model's default, stated in the README
    assert "tools" not in body
    assert client.conversation.messages[-1].text == "Hello there"


async def test_parallel_tool_uses_run_and_their_results_go_back_in_one_message(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.script(
        AnthropicReply(
            "Let me check.",
            tool_uses=[
                ("get_temperature", {"city": "Paris"}),
                AnthropicToolUse("get_temperature", {"city": "Oslo"}, id="toolu_2", pieces=5),
            ],
        ),
        AnthropicReply("Paris 18°C, Oslo -3°C."),
    )
    client = client_for(provider, tools=[get_temperature])
    events = await chat_events(client, "Weather?")
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.result for r in results] == ["18°C", "-3°C"]
    first, second = (r.json for r in server.message_requests)
    assert first["tools"] == [
        {
            "name": "get_temperature",
            "input_schema": get_temperature.schema.parameters,
            "description": get_temperature.schema.description,
        }
    ]
    assert "tool_choice" not in first
    assistant, answers = second["messages"][1:]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert assistant["content"][2] == {
        "type": "tool_use",
        "id": "toolu_2",
        "name": "get_temperature",
        "input": {"city": "Oslo"},
    }
    assert answers["role"] == "user"
    assert [(b["type"], b["tool_use_id"], b["content"]) for b in answers["content"]] == [
        ("tool_result", assistant["content"][1]["id"], "18°C"),
        ("tool_result", "toolu_2", "-3°C"),
    ]
    assert text_of(events) == "Let me check.Paris 18°C, Oslo -3°C."


async def test_a_failing_tool_goes_back_marked_is_error(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.script(
        AnthropicReply(tool_uses=[("get_temperature", {"city": "Atlantis"})]),
        AnthropicReply("Unknown city."),
    )
    await chat_events(client_for(provider, tools=[get_temperature]), "Weather?")
    result = server.message_requests[1].json["messages"][2]["content"][0]
    assert result["type"] == "tool_result"
    assert result["is_error"] is True


async def test_thinking_streams_and_its_blocks_go_back_first_unchanged(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.script(
        AnthropicReply(
            thinking=[
                AnthropicThinking(["The user ", "wants Paris."], signature="sig-one"),
                AnthropicThinking(redacted="ENCRYPTED=="),
            ],
            tool_uses=[("get_temperature", {"city": "Paris"})],
        ),
        AnthropicReply("18°C."),
    )
    client = client_for(provider, tools=[get_temperature], think=True)
    events = await chat_events(client, "Paris?")
    thoughts = [e.text for e in events if isinstance(e, ollm.ThinkingEvent)]
    assert thoughts == ["The user ", "wants Paris."]
    first, second = (r.json for r in server.message_requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert first["max_tokens"] == 8192 + 8192
    assistant = second["messages"][1]["content"]
    assert assistant[:2] == [
        {"type": "thinking", "thinking": "The user wants Paris.", "signature": "sig-one"},
        {"type": "redacted_thinking", "data": "ENCRYPTED=="},
    ]
    assert assistant[2]["type"] == "tool_use"
    assert finish_of(events).reason == "stop"


async def test_a_thinking_level_sets_the_budget(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    await stream(think="low")
    assert server.message_requests[0].json["thinking"]["budget_tokens"] == 2048
    error = error_of(await stream(think="huge"))
    assert error.code == "INVALID_REQUEST"
    assert "thinking level 'huge'" in error.message
    assert len(server.message_requests) == 1


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ("get_temperature", {"type": "tool", "name": "get_temperature"}),
    ],
)
async def test_tool_choice_is_the_apis(
    stream: Stream, server: FakeAnthropicServer, choice: str, sent: dict[str, str]
) -> None:
    await stream(tools=(get_temperature.schema,), tool_choice=choice)
    assert server.message_requests[0].json["tool_choice"] == sent


@pytest.mark.parametrize(
    ("said", "reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("pause_turn", "stop"),
        ("model_context_window_exceeded", "length"),
    ],
)
async def test_stop_reasons_map(
    stream: Stream, server: FakeAnthropicServer, said: str, reason: str
) -> None:
    server.script(AnthropicReply("part", stop_reason=said))
    events = await stream()
    assert finish_of(events).reason == reason
    notices = [e.kind for e in events if isinstance(e, ollm.NoticeEvent)]
    assert notices == (
        {"pause_turn": ["pause_turn"], "model_context_window_exceeded": ["context_window"]}
    ).get(said, [])


async def test_a_refusal_before_any_text_is_content_blocked(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    server.script(
        AnthropicReply(stop_reason="refusal"), AnthropicReply("So", stop_reason="refusal")
    )
    first = await stream()
    assert [e.code for e in first if isinstance(e, ollm.ErrorEvent)] == ["CONTENT_BLOCKED"]
    second = await stream()
    assert [e.kind for e in second if isinstance(e, ollm.NoticeEvent)] == ["refusal"]
    assert finish_of(second).reason == "stop"


async def test_usage_counts_the_prompt_caches_reads_and_writes(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    server.script(AnthropicReply("ok", usage=(10, 4), cache_read=300, cache_creation=50))
    usage = finish_of(await stream()).usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_creation_tokens) == (360, 300, 50)
    assert (usage.completion_tokens, usage.total_tokens) == (4, 364)


async def test_prompt_caching_is_off_by_default_and_marks_three_places_when_on(
    server: FakeAnthropicServer,
) -> None:
    tools = (get_temperature.schema,)
    async with provider_for(server) as plain:
        await _drain(plain, request_for(system_prompt="sys", tools=tools))
    assert "cache_control" not in server.message_requests[0].body.decode()
    async with provider_for(server, prompt_cache=True) as cached:
        await _drain(cached, request_for(system_prompt="sys", tools=tools))
    body = server.message_requests[1].json
    ephemeral = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "sys", "cache_control": ephemeral}]
    assert body["tools"][-1]["cache_control"] == ephemeral
    assert body["messages"][-1]["content"][-1]["cache_control"] == ephemeral


async def _drain(
    provider: AnthropicProvider, request: ollm.ProviderRequest
) -> list[ollm.ProviderEvent]:
    return [e async for e in provider.chat_stream(request)]


async def test_images_go_as_base64_blocks(stream: Stream, server: FakeAnthropicServer) -> None:
    image = ollm.ImagePart(b"\x89PNG fake", "image/png")
    request = ollm.ProviderRequest(
        model=MODEL, messages=(ollm.Message.user("what is it?", images=(image,)),)
    )
    async with provider_for(server) as provider:
        await _drain(provider, request)
    content = server.message_requests[0].json["messages"][0]["content"]
    assert content[1] == {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(b"\x89PNG fake").decode(),
        },
    }
    bad = ollm.Message.user("x", images=(ollm.ImagePart(b"x", "image/tiff"),))
    async with provider_for(server) as provider:
        events = await _drain(provider, ollm.ProviderRequest(model=MODEL, messages=(bad,)))
    assert "JPEG, PNG, GIF and WebP" in error_of(events).message
    assert len(server.message_requests) == 1


async def test_options_map_and_those_the_api_lacks_are_said(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    options = ollm.GenerationOptions(
        temperature=0.2, top_p=0.9, top_k=5, stop=("END",), max_tokens=64, seed=7
    )
    events = await stream(options=options)
    body = server.message_requests[0].json
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.2, 0.9, 5)
    assert (body["stop_sequences"], body["max_tokens"]) == (["END"], 64)
    assert "seed" not in body
    assert [e.kind for e in events if isinstance(e, ollm.NoticeEvent)] == ["option_ignored"]


async def test_typed_output_is_a_forced_tool_whose_input_is_the_answer(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    import msgspec

    class Weather(msgspec.Struct):
        city: str
        celsius: int

    server.script(AnthropicReply(tool_uses=[("ollm_output", {"city": "Paris", "celsius": 18})]))
    client = client_for(provider)
    async with client.chat("Paris?", output=Weather) as events:
        seen = [e async for e in events]
    outputs = [e for e in seen if isinstance(e, ollm.OutputEvent)]
    assert outputs, seen
    assert outputs[0].value == Weather("Paris", 18)
    body = server.message_requests[0].json
    assert body["tool_choice"] == {"type": "tool", "name": "ollm_output"}
    assert body["tools"][0]["name"] == "ollm_output"
    assert body["tools"][0]["input_schema"]["required"] == ["city", "celsius"]


async def test_a_list_output_is_wrapped_in_an_object_and_unwrapped(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    server.script(AnthropicReply(tool_uses=[("ollm_output", {"value": [1, 2]})]))
    events = await stream(response_format=schema)
    assert text_of(events) == "[1,2]"
    sent = server.message_requests[0].json["tools"][0]["input_schema"]
    assert sent == {"type": "object", "properties": {"value": schema}, "required": ["value"]}


async def test_models_are_listed_page_after_page_and_shown(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.page_size = 2
    models = await provider.list_models()
    assert [m.name for m in models] == sorted(server.models)
    assert len([r for r in server.requests if r.path == "/v1/models"]) == 2
    shown = await provider.show_model("claude-opus-4-6")
    assert shown.capabilities.tools is True
    assert shown.details["display_name"] == "Claude Opus 4 6"
    with pytest.raises(ollm.ModelNotFoundError):
        await provider.show_model("claude-nope")


async def test_count_tokens_asks_the_api(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    request = request_for("hello there", system_prompt="sys", tools=(get_temperature.schema,))
    counted = await provider.exact_tokens(request)
    assert counted > 0
    sent = next(r for r in server.requests if r.path == "/v1/messages/count_tokens").json
    assert set(sent) == {"model", "messages", "system", "tools"}
    # Far below the window, the count is an estimate: no request.
    before = len(server.requests)
    assert await provider.count_tokens(request) > 0
    assert len(server.requests) == before


async def test_a_profile_reaches_a_compatible_server_with_its_own_key(
    server: FakeAnthropicServer, tmp_path: object
) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "anthropic.toml"
    path.write_text(
        f'[local]\nbase_url = "{server.url}"\nmodel = "{MODEL}"\napi_key_env = "LOCAL_KEY"\n'
        "max_tokens = 512\n"
    )
    env = {"OLLM_ANTHROPIC_PROFILES": str(path), "LOCAL_KEY": KEY, "ANTHROPIC_API_KEY": "no"}
    async with AnthropicProvider(profile="local", environ=env) as provider:
        assert provider.name == "anthropic:local"
        events = await _drain(provider, request_for())
    assert text_of(events) == "Hello! How can I help?"
    sent = server.message_requests[0]
    assert sent.headers["x-api-key"] == KEY
    assert sent.json["max_tokens"] == 512


async def test_a_forced_tool_while_thinking_is_refused_before_sending(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    events = await stream(tools=(get_temperature.schema,), tool_choice="required", think=True)
    error = error_of(events)
    assert error.code == "INVALID_REQUEST"
    assert "not allow while the model thinks" in error.message
    assert not server.message_requests


async def test_tool_input_pieces_are_passed_on_when_asked(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    server.script(
        AnthropicReply(
            tool_uses=[AnthropicToolUse("get_temperature", {"city": "Paris"}, id="t1", pieces=3)]
        )
    )
    events = await stream(tools=(get_temperature.schema,), tool_call_deltas=True)
    deltas = [e for e in events if isinstance(e, ollm.ToolCallDeltaEvent)]
    assert (deltas[0].id, deltas[0].name) == ("t1", "get_temperature")
    assert "".join(d.arguments_delta for d in deltas) == '{"city": "Paris"}'
    assert len(deltas) == 4
    calls = [e.call for e in events if isinstance(e, ollm.ToolCallEvent)]
    assert calls == [ollm.ToolCall("t1", "get_temperature", {"city": "Paris"})]


async def test_typed_output_streams_as_its_input_arrives(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    import msgspec

    class Dog(msgspec.Struct):
        name: str
        age: int

    value = {"name": "Rex " * 50, "age": 3}
    server.script(AnthropicReply(tool_uses=[AnthropicToolUse("ollm_output", value, pieces=20)]))
    async with client_for(provider).chat("A dog?", output=Dog) as events:
        seen = [e async for e in events]
    texts = [e for e in seen if isinstance(e, ollm.TextEvent)]
    assert len(texts) > 10
    assert "".join(t.text for t in texts) == json.dumps(value)
    partial = [e for e in seen if isinstance(e, ollm.PartialOutputEvent)]
    assert partial
    assert seen.index(partial[0]) < seen.index(texts[-1])
    (output,) = [e for e in seen if isinstance(e, ollm.OutputEvent)]
    assert output.value == Dog("Rex " * 50, 3)


@pytest.mark.parametrize(
    ("model", "thinking"),
    [
        ("claude-sonnet-4-6", True),
        ("claude-3-7-sonnet-20250219", True),
        ("claude-3-haiku-20240307", None),
        ("qwen3-coder", None),
    ],
)
async def test_capabilities_say_which_models_think(
    provider: AnthropicProvider, model: str, thinking: bool | None
) -> None:
    capabilities = await provider.model_capabilities(model)
    assert capabilities.thinking is thinking
    assert capabilities.tools is True
