"""The Messages API's failures: a typed error with the next step, never a traceback or a hang."""

from __future__ import annotations

import pytest

import ollm
from ollm_anthropic import AnthropicProvider
from ollm_http import RetryPolicy
from ollm_testutils import AnthropicReply, FakeAnthropicServer

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

QUICK = RetryPolicy(attempts=3, backoff=0)


async def test_a_wrong_key_is_auth_failed_naming_the_setting(server: FakeAnthropicServer) -> None:
    async with provider_for(server, api_key="wrong") as provider:
        error = error_of([e async for e in provider.chat_stream(request_for())])
    assert error.code == "AUTH_FAILED"
    assert "invalid x-api-key" in error.message
    assert "the api_key argument" in error.message


async def test_without_a_key_anthropics_api_is_not_asked() -> None:
    async with AnthropicProvider(environ={}) as provider:
        error = error_of([e async for e in provider.chat_stream(request_for())])
    assert error.code == "AUTH_FAILED"
    assert "ANTHROPIC_API_KEY" in error.message


@pytest.mark.parametrize(
    ("status", "kind", "message", "code", "words"),
    [
        (403, "permission_error", "no access", "AUTH_FAILED", "may use"),
        (413, "request_too_large", "too big", "INVALID_REQUEST", "smaller images"),
        (400, "invalid_request_error", "temperature: bad", "INVALID_REQUEST", "Check the options"),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
            "CONTEXT_EXCEEDED",
            "too long for",
        ),
        (500, "api_error", "Internal server error", "PROVIDER_ERROR", "status.anthropic.com"),
    ],
)
async def test_each_error_family_has_its_code_and_next_step(
    stream: Stream,
    server: FakeAnthropicServer,
    status: int,
    kind: str,
    message: str,
    code: str,
    words: str,
) -> None:
    server.script(AnthropicReply.failure(status, kind, message))
    error = error_of(await stream())
    assert error.code == code
    assert message in error.message
    assert words in error.message


async def test_a_context_error_carries_the_sizes(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    said = "prompt is too long: 210000 tokens > 200000 maximum"
    server.script(AnthropicReply.failure(400, "invalid_request_error", said))
    error = error_of(await stream())
    assert "(210000 tokens, for a window of 200000)" in error.message


async def test_an_unknown_model_lists_those_there_are(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    error = error_of(await stream(model="claude-nope"))
    assert error.code == "MODEL_NOT_FOUND"
    assert "claude-nope" in error.message
    assert "claude-sonnet-4-6" in error.message
    assert "ollm models list -p anthropic" in error.message


async def test_a_429_says_how_long_to_wait_and_is_waited_out(server: FakeAnthropicServer) -> None:
    limited = AnthropicReply.failure(
        429, "rate_limit_error", "slow down", headers={"retry-after": "7"}
    )
    server.script(limited)
    async with provider_for(server) as provider:
        error = error_of([e async for e in provider.chat_stream(request_for())])
    assert (error.code, error.retry_after) == ("RATE_LIMITED", 7.0)
    server.script(
        AnthropicReply.failure(429, "rate_limit_error", "slow", headers={"retry-after": "0"}),
        AnthropicReply("finally"),
    )
    async with provider_for(server, retry=QUICK) as provider:
        events = [e async for e in provider.chat_stream(request_for())]
    assert text_of(events) == "finally"


async def test_529_overloaded_is_tried_again_like_503(server: FakeAnthropicServer) -> None:
    overloaded = AnthropicReply.failure(529, "overloaded_error", "Overloaded")
    server.script(overloaded, overloaded, AnthropicReply("made it"))
    async with provider_for(server, retry=QUICK) as provider:
        events = [e async for e in provider.chat_stream(request_for())]
    assert text_of(events) == "made it"
    assert len(server.message_requests) == 3
    server.script(overloaded, overloaded, overloaded)
    async with provider_for(server, retry=QUICK) as provider:
        error = error_of([e async for e in provider.chat_stream(request_for())])
    assert error.code == "PROVIDER_ERROR"
    assert "overloaded" in error.message
    assert len(server.message_requests) == 6


async def test_the_default_policy_retries_529() -> None:
    from ollm_anthropic._provider import RETRY

    assert 529 in RETRY.statuses


async def test_an_error_event_mid_stream_is_interrupted_and_the_partial_reply_kept(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.script(
        AnthropicReply(
            ["The answer ", "is"],
            midstream_error={"type": "overloaded_error", "message": "Overloaded"},
        )
    )
    client = client_for(provider)
    events = await chat_events(client, "question")
    error = error_of(events)
    assert error.code == "STREAM_INTERRUPTED"
    assert "overloaded_error: Overloaded" in error.message
    assert finish_of(events).reason == "error"
    last = client.conversation.messages[-1]
    assert (last.role, last.text, last.incomplete) == ("assistant", "The answer is", True)
    # The history stays usable: the next chat sends it and answers.
    server.script(AnthropicReply(" 42."))
    again = await chat_events(client, "go on")
    assert text_of(again) == " 42."
    sent = server.message_requests[-1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]


async def test_a_body_cut_before_message_stop_is_interrupted(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    server.script(AnthropicReply(["Hel", "lo"], tool_uses=[("f", {"a": 1})], end="cut"))
    events = await stream()
    assert text_of(events) == "Hello"
    assert error_of(events).code == "STREAM_INTERRUPTED"
    assert not [e for e in events if isinstance(e, ollm.ToolCallEvent)]


async def test_an_event_that_is_not_json_is_bad_response(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    server.script(AnthropicReply(raw=[b"event: message_start\ndata: {not json\n\n"]))
    error = error_of(await stream())
    assert error.code == "BAD_RESPONSE"
    assert "{not json" in error.message


async def test_tool_input_that_is_not_an_object_goes_back_to_the_model(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    server.script(AnthropicReply(tool_uses=[("f", [1, 2])]))
    calls = [e.call for e in await stream() if isinstance(e, ollm.ToolCallEvent)]
    assert calls[0].invalid_args == "[1, 2]"
    assert calls[0].args == {}


async def test_abort_while_the_server_hangs_ends_cancelled(
    server: FakeAnthropicServer, provider: AnthropicProvider
) -> None:
    server.script(AnthropicReply(["partial"], hang=True))
    abort = ollm.AbortSignal()
    seen: list[ollm.ProviderEvent] = []
    async for event in provider.chat_stream(request_for(abort=abort)):
        seen.append(event)
        if isinstance(event, ollm.TextEvent):
            abort.abort()
    assert finish_of(seen).reason == "cancelled"


async def test_messages_never_show_the_key(server: FakeAnthropicServer) -> None:
    secret = "sk-ant-secret-123"
    async with provider_for(server, api_key=secret) as provider:
        error = error_of([e async for e in provider.chat_stream(request_for())])
        assert secret not in repr(provider)
    assert secret not in error.message


def test_bad_settings_are_refused_clearly() -> None:
    with pytest.raises(ollm.InvalidRequestError, match="whole number of tokens"):
        AnthropicProvider("k", max_tokens=0, environ={})
    with pytest.raises(ollm.InvalidRequestError, match="OLLM_ANTHROPIC_PROMPT_CACHE"):
        AnthropicProvider("k", environ={"OLLM_ANTHROPIC_PROMPT_CACHE": "maybe"})
    with pytest.raises(ollm.ProviderNotFoundError, match="no Anthropic profile 'nope'"):
        AnthropicProvider(profile="nope", environ={"OLLM_ANTHROPIC_PROFILES": "/nonexistent"})


async def test_a_forced_tool_with_a_thinking_budget_larger_than_max_tokens_is_refused(
    stream: Stream, server: FakeAnthropicServer
) -> None:
    options = ollm.GenerationOptions(max_tokens=1000)
    error = error_of(await stream(think="low", options=options))
    assert error.code == "INVALID_REQUEST"
    assert "more than the thinking budget" in error.message
    assert not server.message_requests


async def test_model_is_passed_as_given(stream: Stream, server: FakeAnthropicServer) -> None:
    await stream(model="claude-3-haiku-20240307")
    body = server.message_requests[0].json
    assert (body["model"], body["max_tokens"]) == ("claude-3-haiku-20240307", 4096)
    assert body["model"] != MODEL


async def test_a_bearer_token_alone_reaches_a_gateway(server: FakeAnthropicServer) -> None:
    env = {"ANTHROPIC_AUTH_TOKEN": KEY}
    async with AnthropicProvider(base_url=server.url, environ=env) as provider:
        events = [e async for e in provider.chat_stream(request_for())]
        assert KEY not in repr(provider.config)
    assert text_of(events) == "Hello! How can I help?"
    sent = server.message_requests[0].headers
    assert sent["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in sent
