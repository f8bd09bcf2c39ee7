"""Tool calls in the runtime: an abort while a tool runs ends the chat without waiting
for it, and ids a provider repeats are told apart.

Each test failed on a bug planted one at a time that the whole suite let through once
(tests/MUTATION.md).
"""

from __future__ import annotations

import threading

import anyio
import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, client, collect

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_an_abort_while_a_tool_runs_does_not_wait_for_it(kind: str) -> None:
    """The abort ends the chat at once; the tool's result, when it comes, is not reported."""
    started = threading.Event()
    release = threading.Event()

    @ollm.tool
    async def slow_async() -> str:
        """Wait."""
        started.set()
        await anyio.sleep_forever()
        return "finished"

    @ollm.tool
    def slow_sync() -> str:
        """Wait in a thread."""
        started.set()
        release.wait(60)
        return "finished"

    name = "slow_async" if kind == "async" else "slow_sync"
    provider = ScriptedProvider(Reply(tool_calls=[(name, {})]), Reply("after"))
    chat_client = client(provider, tools=[slow_async, slow_sync])
    signal = ollm.AbortSignal()

    async def abort_when_started() -> None:
        await anyio.to_thread.run_sync(started.wait, 30)
        signal.abort("stop")

    try:
        with anyio.fail_after(30):  # a hang detector: the bug waited for the tool
            async with anyio.create_task_group() as group:
                group.start_soon(abort_when_started)
                events = await collect(chat_client.chat("go", abort=signal))
    finally:
        release.set()
    assert_one_finish_last(events, "cancelled")
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert len(results) == 1
    assert results[0].is_error
    assert "finished" not in results[0].result
    assert_history_valid(chat_client.conversation)


async def test_duplicate_tool_call_ids_from_a_provider_are_renumbered() -> None:
    @ollm.tool
    def echo(text: str) -> str:
        """Echo.

        Args:
            text: What to echo.
        """
        return text

    same = [
        ollm.ToolCall("dup", "echo", {"text": "a"}),
        ollm.ToolCall("dup", "echo", {"text": "b"}),
    ]
    provider = ScriptedProvider(
        Reply(events=[ollm.ToolCallEvent(c) for c in same] + [ollm.FinishEvent("stop")]),
        Reply("done"),
    )
    chat_client = client(provider, tools=[echo])
    events = await collect(chat_client.chat("go"))
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    ids = [r.call.id for r in results]
    assert len(set(ids)) == 2
    assert ids[0] == "dup"
    assert sorted(r.result for r in results) == ["a", "b"]
    assert_history_valid(chat_client.conversation)
    tool_messages = [m for m in chat_client.conversation.messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == ids
