"""SyncChatClient in this process (tests/runtime/test_sync_client.py runs whole programs).

From the mutation run: every test of the blocking client started another Python, which
imports the installed code, so no planted bug in ``ollm.runtime.sync`` could fail one.
"""

from __future__ import annotations

import gc
import threading

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
