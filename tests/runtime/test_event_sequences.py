"""Every event a chat yields, field by field, in the runtime's main paths: tool calls,
the turn and tool-call limits, arguments that cannot be used, cancellation and failure
(from the mutation run of ollm.runtime.run: each field below was once free to change)."""

from __future__ import annotations

import msgspec
import pytest
from runtime_helpers import assert_history_valid, client, collect, settle

import ollm
from ollm.types.depth import MAX_JSON_DEPTH
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

U1 = ollm.Usage(prompt_tokens=10, completion_tokens=2, total_tokens=12)
U2 = ollm.Usage(prompt_tokens=20, completion_tokens=3, total_tokens=23)


@ollm.tool
def double(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    return 2 * x


def _timeless(events: list[ollm.ChatEvent]) -> list[ollm.ChatEvent]:
    """The events with every tool duration set to 0 (the one field a clock decides)."""
    out: list[ollm.ChatEvent] = []
    for event in events:
        if isinstance(event, ollm.ToolCallResultEvent):
            assert event.duration_ms >= 0
            event = msgspec.structs.replace(event, duration_ms=0.0)
        out.append(event)
    return out


async def _chat(provider: ScriptedProvider, **settings: object) -> tuple[list, ollm.ChatClient]:
    chat_client = client(provider, tools=[double], **settings)
    events = [event async for event in chat_client.chat("go")]
    assert_history_valid(chat_client.conversation)
    return _timeless(events), chat_client


async def test_a_plain_reply() -> None:
    events, _ = await _chat(ScriptedProvider(Reply("Hi", usage=U1)))
    assert events == [
        ollm.TextEvent("Hi"),
        ollm.TurnCompleteEvent(1, "stop", 0, U1),
        ollm.FinishEvent("stop", U1),
    ]


async def test_a_tool_call_then_an_answer_adds_up_the_usage() -> None:
    call = ollm.ToolCall("a", "double", {"x": 4})
    provider = ScriptedProvider(
        Reply(tool_calls=[call], finish="tool_calls", usage=U1), Reply("8.", usage=U2)
    )
    events, _ = await _chat(provider)
    assert events == [
        ollm.ToolCallStartEvent(call, 1),
        ollm.ToolCallResultEvent(call, "8", turn=1),
        ollm.TurnCompleteEvent(1, "tool_calls", 1, U1),
        ollm.TextEvent("8."),
        ollm.TurnCompleteEvent(2, "stop", 0, U2),
        ollm.FinishEvent("stop", U1 + U2),
    ]


async def test_the_turn_limit_ends_the_chat_with_the_usage_so_far() -> None:
    """Native calling has no wrap-up turn: after ``max_turns`` the chat ends."""
    call = ollm.ToolCall("a", "double", {"x": 4})
    provider = ScriptedProvider(
        Reply(tool_calls=[call], finish="tool_calls", usage=U1), Reply("never")
    )
    events, _ = await _chat(provider, max_turns=1)
    assert events == [
        ollm.ToolCallStartEvent(call, 1),
        ollm.ToolCallResultEvent(call, "8", turn=1),
        ollm.TurnCompleteEvent(1, "tool_calls", 1, U1),
        ollm.FinishEvent("max_turns", U1),
    ]
    assert len(provider.requests) == 1


async def test_the_tool_call_limit_refuses_the_calls_past_it_and_runs_the_rest() -> None:
    first = ollm.ToolCall("a", "double", {"x": 1})
    second = ollm.ToolCall("b", "double", {"x": 2})
    third = ollm.ToolCall("c", "double", {"x": 3})
    provider = ScriptedProvider(
        Reply(tool_calls=[first, second, third], finish="tool_calls", usage=U1),
        Reply("Done.", usage=U2),
    )
    events, _ = await _chat(provider, max_tool_calls=2)
    refused = (
        "Tool 'double' was not run: this chat reached its limit of 2 tool calls. "
        "Answer with what you have."
    )
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert results == [
        ollm.ToolCallResultEvent(first, "2", turn=1),
        ollm.ToolCallResultEvent(second, "4", turn=1),
        ollm.ToolCallResultEvent(third, refused, True, "TOOL_LIMIT", turn=1),
    ]
    assert events[-1] == ollm.FinishEvent("stop", U1 + U2)


async def test_a_refused_call_does_not_stop_the_checks_of_the_calls_after_it() -> None:
    """A call already refused (bad arguments) is skipped by the limit's count, and the
    calls after it are still counted: the third call here is past the limit."""
    bad = ollm.ToolCall("a", "double", invalid_args="[1, 2")
    first = ollm.ToolCall("b", "double", {"x": 1})
    second = ollm.ToolCall("c", "double", {"x": 2})
    provider = ScriptedProvider(
        Reply(tool_calls=[bad, first, second], finish="tool_calls"), Reply("Done.")
    )
    events, _ = await _chat(provider, max_tool_calls=1)
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [(r.call.id, r.error_code) for r in results] == [
        ("a", "INVALID_ARGUMENTS"),
        ("b", None),
        ("c", "TOOL_LIMIT"),
    ]


async def test_arguments_that_are_not_an_object_go_back_to_the_model_in_full_words() -> None:
    bad = ollm.ToolCall("a", "double", invalid_args="[1, 2")
    provider = ScriptedProvider(Reply(tool_calls=[bad], finish="tool_calls"), Reply("Sorry."))
    events, chat_client = await _chat(provider)
    words = (
        "Tool 'double' was not run: its arguments are not a JSON object (or are nested "
        "too deeply): '[1, 2'. Call it again with the arguments as one flat JSON object."
    )
    assert ollm.ToolCallResultEvent(bad, words, True, "INVALID_ARGUMENTS", turn=1) in events
    tool_message = next(m for m in chat_client.conversation.messages if m.role == "tool")
    assert tool_message.text == words


async def test_arguments_nested_too_deep_go_back_to_the_model_in_full_words() -> None:
    deep: object = 1
    for _ in range(MAX_JSON_DEPTH + 5):
        deep = [deep]
    call = ollm.ToolCall("a", "double", {"x": deep})
    provider = ScriptedProvider(Reply(tool_calls=[call], finish="tool_calls"), Reply("Sorry."))
    events, _ = await _chat(provider)
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [(r.result, r.is_error, r.error_code) for r in results] == [
        (
            f"Tool 'double' was not run: its arguments were nested more than "
            f"{MAX_JSON_DEPTH} levels deep. Send a flatter JSON object.",
            True,
            "INVALID_ARGUMENTS",
        )
    ]
    assert results[0].call.args == {}
    assert results[0].call.id == "a"  # the id stays: only the arguments are dropped


async def test_cancelling_a_reply_with_calls_answers_them_and_keeps_the_usage_so_far() -> None:
    call = ollm.ToolCall("a", "double", {"x": 4})
    later = ollm.ToolCall("b", "double", {"x": 5})
    provider = ScriptedProvider(
        Reply(tool_calls=[call], finish="tool_calls", usage=U1),
        Reply("Thinking", tool_calls=[later], hang=True),
    )
    chat_client = client(provider, tools=[double])
    stream = chat_client.chat("go")
    events: list[ollm.ChatEvent] = []
    async for event in stream:
        events.append(event)
        if isinstance(event, ollm.ToolCallStartEvent) and event.call.id == "b":
            stream.abort()
    events = _timeless(events)
    assert events[-2:] == [
        ollm.ToolCallResultEvent(
            later,
            "Tool 'double' did not run to its end: the chat was cancelled.",
            True,
            "CANCELLED",
            turn=2,
        ),
        ollm.FinishEvent("cancelled", U1),
    ]
    assert_history_valid(chat_client.conversation)
    assert chat_client.conversation.messages[-2].incomplete


async def test_a_failed_second_reply_finishes_with_the_usage_so_far() -> None:
    call = ollm.ToolCall("a", "double", {"x": 4})
    failure = ollm.ErrorEvent("the server fell over", "PROVIDER_ERROR")
    provider = ScriptedProvider(
        Reply(tool_calls=[call], finish="tool_calls", usage=U1), Reply(error=failure)
    )
    events, _ = await _chat(provider)
    assert events[-1] == ollm.FinishEvent("error", U1)
    assert failure in events


async def test_a_tool_that_aborts_the_chat_finishes_it_as_cancelled_with_its_usage() -> None:
    started = []

    @ollm.tool
    async def stop_here() -> str:
        """Stop."""
        started.append(1)
        stream.abort()
        return "stopped"

    provider = ScriptedProvider(
        Reply(tool_calls=[ollm.ToolCall("a", "stop_here", {})], usage=U1), Reply("never")
    )
    chat_client = client(provider, tools=[stop_here])
    stream = chat_client.chat("go")
    events = [event async for event in stream]
    await settle(lambda: bool(started))
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1] == ollm.FinishEvent("cancelled", U1)
    assert not any(isinstance(e, ollm.TurnCompleteEvent) for e in events)


async def test_a_second_turn_over_the_budget_is_not_sent_and_the_chat_ends_with_its_usage() -> None:
    def counter(request: ollm.ProviderRequest) -> int:
        return 100 if len(request.messages) == 1 else 1200  # the tool result is long

    call = ollm.ToolCall("a", "double", {"x": 4})
    provider = ScriptedProvider(
        Reply(tool_calls=[call], finish="tool_calls", usage=U1), "never", token_counter=counter
    )
    chat_client = client(provider, tools=[double], context_window=1000, model="tiny")
    events = await collect(chat_client.chat("go"))
    assert len(provider.requests) == 1
    assert events[-2:] == [
        ollm.ErrorEvent(
            "The request needs about 1200 tokens, but tiny allows 1000. Nothing was sent. Start "
            "a new conversation, shorten the prompt, or raise the context window "
            "(context_window=...).",
            "TOKEN_LIMIT",
        ),
        ollm.FinishEvent("token_limit", U1),
    ]
    assert_history_valid(chat_client.conversation)


async def test_an_abort_while_the_next_request_is_counted_sends_nothing_more() -> None:
    def counter(request: ollm.ProviderRequest) -> int:
        if len(request.messages) > 1:
            stream.abort()  # the user stops the chat while its tokens are counted
        return 10

    call = ollm.ToolCall("a", "double", {"x": 4})
    provider = ScriptedProvider(
        Reply(tool_calls=[call], finish="tool_calls", usage=U1), "never", token_counter=counter
    )
    chat_client = client(provider, tools=[double])
    stream = chat_client.chat("go")
    events = await collect(stream)
    assert len(provider.requests) == 1
    assert events[-1] == ollm.FinishEvent("cancelled", U1)
    assert not [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert_history_valid(chat_client.conversation)


async def test_a_chat_that_cannot_start_ends_with_no_usage_rather_than_unknown() -> None:
    provider = ScriptedProvider("never")
    events = await collect(client(provider, tools=["no_such_tool"]).chat("go"))
    assert events == [
        ollm.ErrorEvent(
            "Tool 'no_such_tool' is not available: no tools are enabled.", "TOOL_NOT_FOUND"
        ),
        ollm.FinishEvent("error", ollm.Usage()),
    ]
    chat_client = client(provider)
    stream = chat_client.chat("go")
    stream.abort()  # before it starts
    assert await collect(stream) == [ollm.FinishEvent("cancelled", ollm.Usage())]
    assert provider.requests == []
