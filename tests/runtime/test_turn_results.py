"""Result events carry their turn and duration; calls of a failed reply say why they did
not run (from the mutation run of ollm.runtime.turn)."""

from __future__ import annotations

import pytest

import ollm
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


@ollm.tool
def double(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    return 2 * x


async def test_result_events_carry_their_turn_and_how_long_the_tool_took() -> None:
    first = ollm.ToolCall("a", "double", {"x": 1})
    second = ollm.ToolCall("b", "double", {"x": 2})
    provider = ScriptedProvider(
        Reply(tool_calls=[first]), Reply(tool_calls=[second]), Reply("Done.")
    )
    client = ollm.ChatClient(ollm.Registries(), provider=provider, tools=[double])
    events = [e async for e in client.chat("go")]
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [(r.call.id, r.turn) for r in results] == [("a", 1), ("b", 2)]
    assert all(isinstance(r.duration_ms, float) and r.duration_ms > 0 for r in results)


async def test_calls_of_a_reply_that_failed_say_why_they_did_not_run() -> None:
    call = ollm.ToolCall("a", "double", {"x": 1})
    failure = ollm.ErrorEvent("the server fell over", "PROVIDER_ERROR")
    provider = ScriptedProvider(Reply("Let me", tool_calls=[call], error=failure))
    client = ollm.ChatClient(ollm.Registries(), provider=provider, tools=[double])
    events = [e async for e in client.chat("go")]
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.result for r in results] == [
        "Tool 'double' did not run to its end: the reply failed."
    ]
    assert results[0].turn == 1
    tool_message = client.conversation.messages[-1]
    assert tool_message.role == "tool"
    assert tool_message.text == results[0].result
