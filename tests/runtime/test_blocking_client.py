"""SyncChatClient in this process (tests/runtime/test_sync_client.py runs whole programs).

From the mutation run: every test of the blocking client started another Python, which
imports the installed code, so no planted bug in ``ollm.runtime.sync`` could fail one.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import threading

import anyio
import pytest
from runtime_helpers import assert_history_valid

import ollm
from ollm_testutils import Reply, ScriptedProvider

BACKENDS = ["asyncio", "trio"]


def loop_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "ollm-sync-loop" and t.is_alive())


def make(*replies: Reply | str, backend: str) -> tuple[ollm.SyncChatClient, ScriptedProvider]:
    provider = ScriptedProvider(*replies)
    chat_client = ollm.ChatClient(ollm.Registries(), provider=provider)
    return ollm.SyncChatClient(chat_client, backend=backend), provider


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_thread_until_used_and_none_after_close(backend: str) -> None:
    before = loop_threads()
    sync, _ = make("one", backend=backend)
    assert loop_threads() == before
    assert sync.run("hi").text == "one"
    assert loop_threads() == before + 1
    sync.close()
    sync.close()
    assert loop_threads() == before
    with pytest.raises(RuntimeError, match="this SyncChatClient is closed"):
        sync.run("again")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_client_dropped_without_close_stops_its_thread(backend: str) -> None:
    before = loop_threads()
    sync, _ = make("one", backend=backend)
    assert sync.run("hi").text == "one"
    del sync
    gc.collect()
    assert loop_threads() == before


@pytest.mark.parametrize("backend", BACKENDS)
def test_keyword_arguments_make_the_client(backend: str) -> None:
    provider = ScriptedProvider("made")
    with ollm.SyncChatClient(
        backend=backend, registries=ollm.Registries(), provider=provider, system="Be brief."
    ) as sync:
        assert sync.run("hi").text == "made"
        assert provider.requests[0].system_prompt == "Be brief."
        assert sync.conversation is sync.client.conversation


def test_an_unknown_backend_is_refused_at_first_use() -> None:
    sync, _ = make("one", backend="nope")
    with pytest.raises(LookupError, match="nope"):
        sync.run("hi")


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_error_in_the_loop_body_closes_the_chat_and_keeps_the_history(backend: str) -> None:
    sync, provider = make(Reply(["par", "tial", " reply"]), "next", backend=backend)

    def read_with_a_bug() -> None:
        for event in sync.chat("one"):
            if isinstance(event, ollm.TextEvent):
                raise ZeroDivisionError  # the caller's own bug, mid-chat

    with sync, pytest.raises(ZeroDivisionError):
        read_with_a_bug()
    assert provider.open_streams == 0
    assert sync.conversation.messages[-1].text == "par"
    assert sync.conversation.messages[-1].incomplete
    assert_history_valid(sync.conversation)


@pytest.mark.parametrize("backend", BACKENDS)
def test_chat_events_arrive_in_order_and_end_with_the_finish(backend: str) -> None:
    sync, _ = make(Reply(["a", "b"]), backend=backend)
    with sync:
        events = list(sync.chat("hi"))
    assert [e.text for e in events if isinstance(e, ollm.TextEvent)] == ["a", "b"]
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "stop"


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_and_chat_pass_their_prompt_and_keywords_on(backend: str) -> None:
    sync, provider = make("one", "two", backend=backend)
    with sync:
        assert sync.run("first", system="Be brief.").text == "one"
        assert [e.text for e in sync.chat("second", model="other") if hasattr(e, "text")] == ["two"]
    first, second = provider.requests
    assert (first.messages[-1].text, first.system_prompt) == ("first", "Be brief.")
    assert (second.messages[-1].text, second.model) == ("second", "other")


def test_the_default_backend_is_asyncio_and_its_thread_a_daemon() -> None:
    @ollm.tool
    async def library() -> str:
        """Which async library runs the tools."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return "not asyncio"
        return "asyncio"

    provider = ScriptedProvider(Reply(tool_calls=[("library", {})]), "done")
    client = ollm.ChatClient(ollm.Registries(), provider=provider)
    with ollm.SyncChatClient(client) as sync:
        result = sync.run("which?", tools=[library])
        assert [r.result for r in result.tool_results] == ["asyncio"]
        threads = [t for t in threading.enumerate() if t.name == "ollm-sync-loop"]
        assert threads
        assert all(t.daemon for t in threads)


def test_closing_a_client_never_used_is_a_no_op() -> None:
    before = loop_threads()
    sync, provider = make("one", backend="asyncio")
    sync.close()
    sync.close()
    assert loop_threads() == before
    assert provider.requests == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_ctrl_c_in_the_loop_aborts_the_chat_and_the_client_goes_on(backend: str) -> None:
    sync, provider = make(Reply(["par", "tial", " reply"]), "next", backend=backend)

    def read_then_ctrl_c() -> None:
        for event in sync.chat("one"):
            if isinstance(event, ollm.TextEvent):
                raise KeyboardInterrupt

    with sync:
        with pytest.raises(KeyboardInterrupt):
            read_then_ctrl_c()
        assert provider.open_streams == 0
        last = sync.conversation.messages[-1]
        assert (last.text, last.incomplete) == ("par", True)
        assert_history_valid(sync.conversation)
        assert sync.run("two").text == "next"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_real_ctrl_c_while_a_tool_runs_cancels_it_in_the_history(backend: str) -> None:
    @ollm.tool
    async def slow() -> str:
        """Ask for a Ctrl-C, then take far too long."""
        os.kill(os.getpid(), signal.SIGINT)  # lands in the caller, waiting for the next event
        await anyio.sleep(60)
        return "too late"

    sync, provider = make(Reply("Calling.", tool_calls=[("slow", {})]), "next", backend=backend)
    kinds: list[type] = []

    def read() -> None:
        for event in sync.chat("one", tools=[slow]):
            kinds.append(type(event))

    with sync:
        with pytest.raises(KeyboardInterrupt):
            read()
        assert kinds == [ollm.TextEvent, ollm.ToolCallStartEvent]
        assert sync.conversation.messages[-1].text == (
            "Tool 'slow' did not run to its end: the chat was cancelled."
        )
        assert provider.open_streams == 0
        assert_history_valid(sync.conversation)
        assert sync.run("two").text == "next"
