"""Gemini's own details: thinking that cannot be turned off, empty replies, model names,
call ids across turns, and a fake that takes what the real API takes."""

from __future__ import annotations

import json
import urllib.request

import pytest

import ollm
from ollm_gemini import GeminiProvider
from ollm_testutils import FakeGeminiServer, GeminiReply

from .conftest import KEY, Stream, error_of, provider_events, request_for, text_of

pytestmark = pytest.mark.anyio


def thinking_config(server: FakeGeminiServer) -> object:
    return server.generate_requests[-1].json["generationConfig"].get("thinkingConfig")


@pytest.mark.parametrize(
    ("model", "sent", "notice"),
    [
        # 2.5 Pro refuses a budget of 0 ("This model only works in thinking mode").
        ("gemini-2.5-pro", {"thinkingBudget": 128}, "its smallest thinking budget (128 tokens)"),
        ("models/gemini-2.5-pro-preview-06-05", {"thinkingBudget": 128}, "128 tokens"),
        ("gemini-3-pro-preview", {"thinkingLevel": "low"}, "its lowest thinking level (low)"),
        # Flash takes 0: thinking is off, and nothing needs saying.
        ("gemini-2.5-flash", {"thinkingBudget": 0}, None),
    ],
)
async def test_think_off_on_a_model_that_cannot_stop_thinking_sends_its_least_and_says_so(
    server: FakeGeminiServer, stream: Stream, model: str, sent: object, notice: str | None
) -> None:
    server.models[model.removeprefix("models/")] = 1048576
    server.script(GeminiReply("Hi."))
    events = await stream(model=model, think=False)
    assert thinking_config(server) == sent
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent) and e.kind == "thinking"]
    if notice is None:
        assert notices == []
    else:
        [said] = notices
        assert notice in said.message
        assert "cannot turn thinking off" in said.message
    assert text_of(events) == "Hi."


async def test_an_empty_reply_is_said_not_silent(server: FakeGeminiServer, stream: Stream) -> None:
    server.script(GeminiReply(text=()))
    events = await stream()
    [notice] = [e for e in events if isinstance(e, ollm.NoticeEvent)]
    assert notice.kind == "empty_reply"
    assert "empty reply" in notice.message
    assert isinstance(events[-1], ollm.FinishEvent)


async def test_a_reply_with_text_has_no_empty_reply_notice(
    server: FakeGeminiServer, stream: Stream
) -> None:
    server.script(GeminiReply("x"))
    assert not [e for e in await stream() if isinstance(e, ollm.NoticeEvent)]


@pytest.mark.parametrize(
    "model",
    ["files/abc", "cachedContents/c1", "./.", "models/../files/x", "tunedModels/a/b", "a?b", ""],
)
async def test_a_name_that_is_not_a_models_never_reaches_the_api(
    server: FakeGeminiServer, model: str
) -> None:
    async with GeminiProvider(KEY, base_url=server.url, environ={}) as provider:
        events = await provider_events(provider, request_for(model=model))
        with pytest.raises(ollm.InvalidRequestError):
            await provider.show_model(model)
    assert error_of(events).code == "INVALID_REQUEST"
    assert server.requests == []  # the key went nowhere


@pytest.mark.parametrize("model", ["gemini-2.5-flash", "models/gemini-2.5-flash", "tunedModels/t1"])
async def test_names_the_api_has_are_taken(server: FakeGeminiServer, model: str) -> None:
    server.models[model.removeprefix("models/")] = 1048576
    server.script(GeminiReply("ok"))
    async with GeminiProvider(KEY, base_url=server.url, environ={}) as provider:
        events = await provider_events(provider, request_for(model=model))
    assert text_of(events) == "ok"


async def test_call_ids_made_by_ollm_never_repeat_across_turns(
    server: FakeGeminiServer, stream: Stream
) -> None:
    # Gemini 2.x sends calls without ids: ollm's own must differ from turn to turn, or
    # a result would answer the wrong call in the history.
    server.script(GeminiReply(calls=[("f", {})]), GeminiReply(calls=[("f", {})]))
    first = await stream()
    second = await stream()
    ids = [e.call.id for e in first + second if isinstance(e, ollm.ToolCallEvent)]
    assert len(ids) == 2
    assert ids[0] != ids[1]


def test_the_fake_takes_schema_types_in_lower_case_as_the_api_does(
    server: FakeGeminiServer,
) -> None:
    # Google's own REST examples write "type": "object"; a fake stricter than the API
    # would teach users wrong.
    server.script(GeminiReply("ok"))
    tool = {
        "name": "f",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
    }
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": [tool]}
    request = urllib.request.Request(
        f"{server.url}/v1beta/models/gemini-2.5-flash:generateContent",
        data=json.dumps({**body, "tools": [{"functionDeclarations": [tool]}]}).encode(),
        headers={"x-goog-api-key": KEY, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as reply:
        assert reply.status == 200
        assert "ok" in reply.read().decode()
