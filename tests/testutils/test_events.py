"""EventCollector: gathering events and answering questions about them."""

from __future__ import annotations

import pytest

import ollm
from ollm_testutils import EventCollector, Reply, ScriptedProvider

CALL = ollm.ToolCall("c1", "f", {"a": 1})


def sample() -> EventCollector:
    return EventCollector(
        [
            ollm.NoticeEvent("switched", "strategy"),
            ollm.ThinkingEvent("hm"),
            ollm.TextEvent("Let me "),
            ollm.TextEvent("check."),
            ollm.ToolCallStartEvent(CALL, 1),
            ollm.ToolCallResultEvent(CALL, "1", turn=1),
            ollm.TurnCompleteEvent(1, "stop", 1),
            ollm.TokenWarningEvent(95, 100, 128),
            ollm.TextEvent("It is 1."),
            ollm.TurnCompleteEvent(2),
            ollm.FinishEvent("stop", ollm.Usage(3, 4, 7)),
        ]
    )


def test_questions() -> None:
    events = sample()
    assert events.types == [
        "notice", "thinking", "text", "text", "tool_call_start", "tool_call_result",
        "turn_complete", "token_warning", "text", "turn_complete", "finish",
    ]  # fmt: skip
    assert events.text == "Let me check.It is 1."
    assert events.final_text == "It is 1."
    assert events.thinking == "hm"
    assert events.tool_calls == [CALL]
    assert events.tool_names == ["f"]
    assert [r.result for r in events.tool_results] == ["1"]
    assert len(events.turns) == 2
    assert len(events.warnings) == 1
    assert len(events.notices) == 1
    assert events.finish_reason == "stop"
    assert events.usage == ollm.Usage(3, 4, 7)
    assert events.errors == []
    assert events.error is None
    assert len(events) == 11
    assert isinstance(events[0], ollm.NoticeEvent)
    assert list(events)[-1] == events.finish
    events.assert_ok().assert_well_formed()


def test_errors_and_failed_assertions() -> None:
    events = EventCollector()
    events(ollm.TextEvent("x"))
    events.add(ollm.ErrorEvent("gone", "STREAM_INTERRUPTED"))
    assert events.finish is None
    assert events.finish_reason is None
    assert events.usage is None
    with pytest.raises(AssertionError, match="exactly one finish"):
        events.assert_well_formed()
    with pytest.raises(AssertionError, match="normal finish"):
        events.assert_ok()
    events.add(ollm.FinishEvent("error"))
    assert events.assert_error("STREAM_INTERRUPTED").message == "gone"
    assert events.error_codes == ["STREAM_INTERRUPTED"]
    with pytest.raises(AssertionError, match="TIMEOUT"):
        events.assert_error("TIMEOUT")
    events.clear()
    assert len(events) == 0


def test_provider_events_count_as_tool_calls() -> None:
    events = EventCollector([ollm.ToolCallEvent(CALL), ollm.FinishEvent("stop")])
    assert events.tool_calls == [CALL]


@pytest.mark.anyio
async def test_collect_a_chat() -> None:
    provider = ScriptedProvider(Reply(["Hi", " there"]))
    client = ollm.ChatClient(ollm.Registries(), provider=provider)
    events = await EventCollector().collect(client.chat("hello"))
    assert events.text == "Hi there"
    events.assert_ok().assert_well_formed()


def test_collect_a_sync_chat() -> None:
    provider = ScriptedProvider(Reply(["Hi"]))
    with ollm.SyncChatClient(registries=ollm.Registries(), provider=provider) as client:
        events = EventCollector().collect_sync(client.chat("hello"))
    assert events.text == "Hi"
    assert events.finish_reason == "stop"
