"""End to end: ChatClient + GeminiProvider against the fake Gemini API, on asyncio and trio."""

from __future__ import annotations

import base64
import re

import anyio
import pytest

import ollm
from ollm_gemini import GeminiProvider
from ollm_testutils import FakeGeminiServer, GeminiCall, GeminiReply

from .conftest import (
    KEY,
    MODEL,
    Run,
    Stream,
    chat_events,
    client_for,
    error_of,
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


def finish_of(events: list[ollm.ChatEvent]) -> ollm.FinishEvent:
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    return finish


async def test_text_streams_and_the_history_keeps_it(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    server.script(GeminiReply(["Hel", "lo", " there"], usage=(12, 3)))
    client = client_for(provider, system="Be brief.")
    events = await chat_events(client, "hi")
    assert [e.text for e in events if isinstance(e, ollm.TextEvent)] == ["Hel", "lo", " there"]
    finish = finish_of(events)
    assert finish.reason == "stop"
    assert finish.usage is not None
    assert (finish.usage.prompt_tokens, finish.usage.completion_tokens) == (12, 3)
    sent = server.generate_requests[0]
    assert sent.path == f"/v1beta/models/{MODEL}:streamGenerateContent"
    assert sent.query == "alt=sse"
    assert sent.json["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert sent.json["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert "tools" not in sent.json
    assert "generationConfig" not in sent.json
    assert client.conversation.messages[-1].text == "Hello there"


async def test_the_key_travels_in_the_header_never_in_the_url(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    await provider_for_events(provider)
    await provider.list_models()
    for recorded in server.requests:
        assert recorded.headers["x-goog-api-key"] == KEY
        assert KEY not in recorded.path
        assert "key=" not in recorded.query


async def provider_for_events(provider: GeminiProvider) -> list[ollm.ProviderEvent]:
    return [e async for e in provider.chat_stream(request_for())]


async def test_a_function_call_runs_and_its_result_goes_back_by_name(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    server.script(
        GeminiReply(calls=[("get_temperature", {"city": "Paris"})]),
        GeminiReply("It is 18°C in Paris."),
    )
    client = client_for(provider, tools=[get_temperature])
    events = await chat_events(client, "Weather in Paris?")
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.result for r in results] == ["18°C"]
    assert text_of(events) == "It is 18°C in Paris."
    first, second = (r.json for r in server.generate_requests)
    declaration = first["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "get_temperature"
    assert declaration["parameters"]["type"] == "OBJECT"
    assert declaration["parameters"]["properties"]["city"]["type"] == "STRING"
    assert "toolConfig" not in first
    model_turn, results_turn = second["contents"][1:]
    assert model_turn["role"] == "model"
    call_part = model_turn["parts"][0]
    assert call_part["functionCall"] == {"name": "get_temperature", "args": {"city": "Paris"}}
    # The signature the API gave with the call goes back with it, as it came.
    assert call_part["thoughtSignature"] == "c2lnbmF0dXJlget_temperature"
    assert results_turn == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "get_temperature", "response": {"result": "18°C"}}}
        ],
    }
    history = client.conversation.messages
    assert history[1].tool_calls[0].signature == "c2lnbmF0dXJlget_temperature"


async def test_parallel_calls_from_several_events_all_run_and_answer_in_one_turn(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    server.script(
        GeminiReply(
            ["Checking both."],
            calls=[("get_temperature", {"city": "Paris"}), ("get_temperature", {"city": "Oslo"})],
            calls_per_event=1,
        ),
        GeminiReply("Paris 18, Oslo -3."),
    )
    client = client_for(provider, tools=[get_temperature])
    events = await chat_events(client, "Paris and Oslo?")
    results = [e.result for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert results == ["18°C", "-3°C"]
    ids = [c.id for c in client.conversation.messages[1].tool_calls]
    assert len(set(ids)) == 2
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in ids)  # ollm's one id format
    second = server.generate_requests[1].json["contents"]
    answers = [p["functionResponse"]["response"]["result"] for p in second[2]["parts"]]
    assert answers == ["18°C", "-3°C"]
    # Only the first call of a step carries the signature, as the API sends it.
    parts = second[1]["parts"]
    assert "thoughtSignature" in parts[1]
    assert "thoughtSignature" not in parts[2]


async def test_call_ids_stay_unique_across_turns_and_the_apis_own_ids_go_back(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    server.script(
        GeminiReply(calls=[("get_temperature", {"city": "Paris"})]),
        GeminiReply(calls=[GeminiCall("get_temperature", {"city": "Oslo"}, id="fc-7")]),
        GeminiReply("Done."),
    )
    client = client_for(provider, tools=[get_temperature])
    await chat_events(client, "Both, one after the other.")
    calls = [c for m in client.conversation.messages for c in m.tool_calls]
    assert re.fullmatch(r"call_[0-9a-f]{24}", calls[0].id)
    assert calls[1].id == "fc-7"
    last = server.generate_requests[2].json["contents"]
    assert "id" not in last[1]["parts"][0]["functionCall"]  # ollm's own id stays home
    assert last[3]["parts"][0]["functionCall"]["id"] == "fc-7"
    assert last[4]["parts"][0]["functionResponse"]["id"] == "fc-7"


async def test_gemini_3_gets_the_documented_placeholder_for_a_call_without_signature(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    call = ollm.ToolCall("call_9", "get_temperature", {"city": "Oslo"})
    history = [
        ollm.Message.user("Oslo?"),
        ollm.Message.assistant(tool_calls=(call,)),
        ollm.Message.tool("-3°C", call=call),
    ]
    server.script(GeminiReply("Cold."))
    request = ollm.ProviderRequest(
        model="gemini-3-pro-preview", messages=tuple(history), tools=(get_temperature.schema,)
    )
    events = [e async for e in provider.chat_stream(request)]
    assert text_of(events) == "Cold."
    part = server.generate_requests[0].json["contents"][1]["parts"][0]
    assert part["thoughtSignature"] == "skip_thought_signature_validator"


async def test_gemini_3_refuses_a_call_without_signature_and_ollm_never_sends_one(
    server: FakeGeminiServer,
) -> None:
    # The fake server is faithful to the rule: a gemini-3 turn without the signature fails.
    server.script(
        GeminiReply(calls=[GeminiCall("get_temperature", {"city": "Paris"}, signature="s1")]),
        GeminiReply("Mild."),
    )
    async with provider_for(server, model="gemini-3-pro-preview") as provider:
        client = client_for(provider, tools=[get_temperature])
        events = await chat_events(client, "Paris?")
    assert text_of(events) == "Mild."
    sent = server.generate_requests[1].json["contents"][1]["parts"][0]
    assert sent["thoughtSignature"] == "s1"


async def test_thoughts_stream_as_thinking_and_think_maps_to_thinking_config(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    server.script(GeminiReply(["Four."], thoughts=["Two and ", "two."], usage=(5, 2, 40)))
    events = await chat_events(client_for(provider), "2+2?", think=True)
    thinking = [e.text for e in events if isinstance(e, ollm.ThinkingEvent)]
    assert thinking == ["Two and ", "two."]
    assert text_of(events) == "Four."
    usage = finish_of(events).usage
    assert usage is not None
    assert (usage.completion_tokens, usage.reasoning_tokens) == (42, 40)
    config = server.generate_requests[0].json["generationConfig"]
    assert config["thinkingConfig"] == {"includeThoughts": True}


@pytest.mark.parametrize(
    ("model", "think", "expected"),
    [
        (MODEL, False, {"thinkingBudget": 0}),
        (MODEL, "low", {"includeThoughts": True, "thinkingBudget": 1024}),
        ("gemini-3-pro-preview", "high", {"includeThoughts": True, "thinkingLevel": "high"}),
        ("gemini-3-pro-preview", False, {"thinkingLevel": "low"}),
    ],
)
async def test_think_levels(
    server: FakeGeminiServer,
    provider: GeminiProvider,
    model: str,
    think: bool | str,
    expected: dict[str, object],
) -> None:
    await provider_collect(provider, request_for(model=model, think=think))
    assert server.generate_requests[0].json["generationConfig"]["thinkingConfig"] == expected


async def provider_collect(
    provider: GeminiProvider, request: ollm.ProviderRequest
) -> list[ollm.ProviderEvent]:
    return [e async for e in provider.chat_stream(request)]


async def test_options_images_tool_choice_and_json_output_are_mapped(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    image = ollm.ImagePart(b"\x89PNG...", "image/png")
    request = ollm.ProviderRequest(
        model=MODEL,
        messages=(ollm.Message.user("What is this?", images=(image,)),),
        tools=(get_temperature.schema,),
        tool_choice="get_temperature",
        options=ollm.GenerationOptions(
            temperature=0.2,
            top_p=0.9,
            top_k=40,
            seed=7,
            max_tokens=100,
            stop=("END",),
            extra={"presencePenalty": 0.5, "safetySettings": [{"category": "X"}]},
        ),
        response_format={"type": "object", "properties": {"answer": {"type": "string"}}},
    )
    await provider_collect(provider, request)
    body = server.generate_requests[0].json
    assert body["contents"][0]["parts"][1] == {
        "inlineData": {"mimeType": "image/png", "data": base64.b64encode(image.data).decode()}
    }
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_temperature"]}
    }
    assert body["safetySettings"] == [{"category": "X"}]
    assert body["generationConfig"] == {
        "presencePenalty": 0.5,
        "temperature": 0.2,
        "topP": 0.9,
        "topK": 40,
        "seed": 7,
        "maxOutputTokens": 100,
        "stopSequences": ["END"],
        "responseMimeType": "application/json",
        "responseSchema": {
            "type": "OBJECT",
            "properties": {"answer": {"type": "STRING"}},
            "propertyOrdering": ["answer"],
        },
    }


async def test_max_tokens_is_length(server: FakeGeminiServer, run: Run) -> None:
    server.script(GeminiReply(["Once upon"], finish_reason="MAX_TOKENS"))
    events = await run()
    assert finish_of(events).reason == "length"


async def test_a_safety_block_before_any_text_is_content_blocked_naming_why(
    server: FakeGeminiServer, run: Run
) -> None:
    ratings = [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}]
    server.script(GeminiReply(finish_reason="SAFETY", safety_ratings=ratings))
    events = await run()
    error = error_of(events)
    assert error.code == "CONTENT_BLOCKED"
    assert "safety" in error.message
    assert "dangerous content" in error.message
    assert finish_of(events).reason == "error"


async def test_a_block_part_way_keeps_the_text_and_says_so(
    server: FakeGeminiServer, run: Run
) -> None:
    server.script(GeminiReply(["The song goes"], finish_reason="RECITATION"))
    events = await run()
    assert text_of(events) == "The song goes"
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent)]
    assert notices
    assert "copyrighted" in notices[0].message
    assert finish_of(events).reason == "stop"


async def test_a_blocked_prompt_says_the_block_reason(server: FakeGeminiServer, run: Run) -> None:
    server.script(GeminiReply(block_reason="PROHIBITED_CONTENT"))
    error = error_of(await run())
    assert error.code == "CONTENT_BLOCKED"
    assert "PROHIBITED_CONTENT" in error.message


async def test_a_malformed_call_gets_one_correction_then_works(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    server.script(
        GeminiReply(finish_reason="MALFORMED_FUNCTION_CALL", finish_message="print(x("),
        GeminiReply(calls=[("get_temperature", {"city": "Oslo"})]),
        GeminiReply("Cold."),
    )
    client = client_for(provider, tools=[get_temperature])
    events = await chat_events(client, "Oslo?")
    notices = [e.message for e in events if isinstance(e, ollm.NoticeEvent)]
    assert any("could not be parsed (print(x()" in n for n in notices)
    assert text_of(events) == "Cold."
    corrected = server.generate_requests[1].json["contents"]
    assert corrected[-1]["role"] == "user"
    assert "could not be parsed" in corrected[-1]["parts"][0]["text"]
    # The correction is not history: the conversation holds what the user and model said.
    assert all("could not be parsed" not in m.text for m in client.conversation.messages)


async def test_a_second_malformed_call_is_bad_response(server: FakeGeminiServer, run: Run) -> None:
    server.script(
        GeminiReply(finish_reason="MALFORMED_FUNCTION_CALL"),
        GeminiReply(finish_reason="MALFORMED_FUNCTION_CALL"),
    )
    events = await run(tools=[get_temperature])
    assert error_of(events).code == "BAD_RESPONSE"
    assert len(server.generate_requests) == 2


async def test_a_cut_stream_is_interrupted_and_the_partial_reply_is_kept(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    server.script(GeminiReply(["Part", "ial"], end="cut", finish_reason=None))
    client = client_for(provider)
    events = await chat_events(client, "hi")
    assert error_of(events).code == "STREAM_INTERRUPTED"
    last = client.conversation.messages[-1]
    assert last.text == "Partial"
    assert last.incomplete
    server.script(GeminiReply("Again."))
    assert text_of(await chat_events(client, "go on")) == "Again."


async def test_a_body_that_ends_without_a_finish_reason_is_interrupted(
    server: FakeGeminiServer, run: Run
) -> None:
    server.script(GeminiReply(["Half"], finish_reason=None))
    assert error_of(await run()).code == "STREAM_INTERRUPTED"


async def test_an_error_in_the_middle_of_the_stream_is_reported(
    server: FakeGeminiServer, run: Run
) -> None:
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    server.script(GeminiReply(["Hi"], midstream_error=error))
    events = await run()
    failure = error_of(events)
    assert failure.code == "PROVIDER_ERROR"
    assert "middle of the reply" in failure.message
    assert "overloaded" in failure.message


@pytest.mark.parametrize(
    "raw",
    [
        [b"data: {not json}\r\n\r\n"],
        [b"data: " + b"[" * 5000 + b"]" * 5000 + b"\r\n\r\n"],
        [b"data: " + b'{"candidates": [{"content": {"parts": "x"}}]}' + b"\r\n\r\n"],
    ],
    ids=["not-json", "deep", "wrong-shape"],
)
async def test_hostile_events_are_bad_response_never_a_traceback(
    server: FakeGeminiServer, stream: Stream, raw: list[bytes]
) -> None:
    server.script(GeminiReply(raw=raw))
    events = await stream()
    assert error_of(events).code == "BAD_RESPONSE"


async def test_arguments_that_are_not_an_object_go_back_to_the_model(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    server.script(
        GeminiReply(calls=[GeminiCall("get_temperature", ["Paris"])]),
        GeminiReply("Sorry."),
    )
    client = client_for(provider, tools=[get_temperature])
    events = await chat_events(client, "Paris?")
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert results[0].is_error
    assert results[0].error_code == "INVALID_ARGUMENTS"
    assert text_of(events) == "Sorry."


async def test_abort_while_the_model_writes_ends_cancelled_at_once(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    server.script(GeminiReply(["Thinking"], hang=True, finish_reason=None))
    client = client_for(provider)
    seen: list[ollm.ChatEvent] = []
    with anyio.fail_after(10):
        async with client.chat("hi") as events:
            async for event in events:
                seen.append(event)
                if isinstance(event, ollm.TextEvent):
                    events.abort()
    assert finish_of(seen).reason == "cancelled"
    assert client.conversation.messages[-1].text == "Thinking"


async def test_json_output_without_a_schema(server: FakeGeminiServer, stream: Stream) -> None:
    await stream(response_format="json")
    config = server.generate_requests[0].json["generationConfig"]
    assert config == {"responseMimeType": "application/json"}


async def test_more_stop_sequences_than_gemini_takes_is_a_clear_error(stream: Stream) -> None:
    options = ollm.GenerationOptions(stop=tuple("abcdef"))
    events = await stream(options=options)
    error = error_of(events)
    assert error.code == "INVALID_REQUEST"
    assert "at most 5 stop sequences" in error.message


async def test_the_default_model_comes_from_the_environment(server: FakeGeminiServer) -> None:
    provider = GeminiProvider(
        base_url=server.url, environ={"GEMINI_API_KEY": KEY, "OLLM_GEMINI_MODEL": "gemini-2.5-pro"}
    )
    async with provider:
        client = client_for(provider)
        assert text_of(await chat_events(client, "hi"))
    assert "gemini-2.5-pro:" in server.generate_requests[0].path
