"""The steps of a turn, each on its own: the stream step (``Turn.take``) for every kind of
provider event, and the order the steps run in, seen from the public API.

The chat loop (``ollm.runtime.run.ChatRun.events``) keeps text inline and hands every
other event to ``Turn.take``; these tests pin what each kind does to the turn and what
the caller sees of it, so a change to one step shows here before it shows in a chat.
"""

from __future__ import annotations

import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last

import ollm
from ollm.runtime.conversation import Conversation
from ollm.runtime.turn import Turn
from ollm_testutils import Reply, ScriptedProvider


def _turn() -> Turn:
    return Turn(3, Conversation())


def test_thinking_is_kept_and_shown_as_it_came() -> None:
    turn = _turn()
    event = ollm.ThinkingEvent("hmm")
    assert turn.take(event, "p", stop_at_truncation=False) is event
    assert turn.thinking_parts == ["hmm"]
    assert turn.error is None


def test_a_call_is_queued_numbered_and_shown_as_its_start() -> None:
    turn = _turn()
    shown = turn.take(
        ollm.ToolCallEvent(ollm.ToolCall("", "f", {"a": 1})), "p", stop_at_truncation=False
    )
    assert isinstance(shown, ollm.ToolCallStartEvent)
    assert shown.turn == 3
    assert shown.call.id == "call_3_0"  # given an id: it had none
    assert turn.calls == [shown.call]


def test_the_finish_ends_the_stream_with_its_reason_and_usage() -> None:
    turn = _turn()
    usage = ollm.Usage(prompt_tokens=5, completion_tokens=7)
    assert turn.take(ollm.FinishEvent("length", usage), "p", stop_at_truncation=False) is None
    assert (turn.finish_reason, turn.usage, turn.error) == ("length", usage, None)


def test_an_error_ends_the_stream_and_is_the_turns_error() -> None:
    turn = _turn()
    error = ollm.ErrorEvent("gone", "PROVIDER_ERROR")
    assert turn.take(error, "p", stop_at_truncation=False) is None
    assert turn.error is error


@pytest.mark.parametrize("stop", [False, True])
def test_a_cut_prompt_ends_the_stream_only_when_the_chat_says_so(stop: bool) -> None:
    turn = _turn()
    notice = ollm.NoticeEvent("the server cut the prompt", "context_truncated")
    shown = turn.take(notice, "p", stop_at_truncation=stop)
    if stop:
        assert shown is None
        assert turn.error is not None
        assert turn.error.code == "CONTEXT_EXCEEDED"
    else:
        assert shown is notice
        assert turn.error is None


def test_other_notices_and_argument_deltas_pass_as_they_are() -> None:
    turn = _turn()
    notice = ollm.NoticeEvent("loading", "loading_model")
    delta = ollm.ToolCallDeltaEvent(0, id="c", name="f", arguments_delta='{"a"')
    assert turn.take(notice, "p", stop_at_truncation=True) is notice
    assert turn.take(delta, "p", stop_at_truncation=True) is delta
    assert turn.error is None
    assert not turn.calls


def test_something_that_is_not_a_provider_event_ends_the_stream_naming_the_provider() -> None:
    turn = _turn()
    odd = ollm.TurnCompleteEvent(1, "stop", 0, None)  # a chat event, not a provider's
    assert turn.take(odd, "mine", stop_at_truncation=False) is None  # type: ignore[arg-type]
    assert turn.error is not None
    assert turn.error.code == "BAD_RESPONSE"
    assert "'mine'" in turn.error.message
    assert "TurnCompleteEvent" in turn.error.message


@ollm.tool
def double(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    return 2 * x


@pytest.mark.anyio
async def test_the_steps_run_in_order_request_stream_settle_tools_commit() -> None:
    """Prepare's notices first, each turn's stream, its calls' results after the
    stream and before the turn completes, the reply and results committed before the
    next request is made, and one finish last."""
    call = ollm.ToolCall("a", "double", {"x": 21})
    provider = ScriptedProvider(Reply("Let me.", tool_calls=[call]), Reply("42."))
    client = ollm.ChatClient(ollm.Registries(), provider=provider, tools=[double])
    conversation = ollm.Conversation()
    events = [e async for e in client.chat("go", conversation=conversation)]
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "TextEvent",
        "ToolCallStartEvent",
        "ToolCallResultEvent",
        "TurnCompleteEvent",
        "TextEvent",
        "TurnCompleteEvent",
        "FinishEvent",
    ]
    # The second request carried the first turn's reply and its result (commit ran
    # before the next request step).
    second = provider.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool"]
    assert second[2].text == "42"
    assert_history_valid(conversation)
    assert_one_finish_last(events)
