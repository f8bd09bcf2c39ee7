"""SyncChatClient in this process (tests/runtime/test_sync_client.py runs whole programs).

From the mutation run: every test of the blocking client started another Python, which
imports the installed code, so no planted bug in ``ollm.runtime.sync`` could fail one.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

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
    abort = ollm.AbortSignal()

    def read() -> None:
        for event in sync.chat("one", tools=[slow], abort=abort):
            kinds.append(type(event))

    with sync:
        with pytest.raises(KeyboardInterrupt):
            read()
        assert kinds == [ollm.TextEvent, ollm.ToolCallStartEvent]
        assert abort.reason == "interrupted"
        assert sync.conversation.messages[-1].text == (
            "Tool 'slow' did not run to its end: the chat was cancelled."
        )
        assert provider.open_streams == 0
        assert_history_valid(sync.conversation)
        assert sync.run("two").text == "next"


class Stubborn(ScriptedProvider):
    """A provider that will not close (or end after an abort) until it is released.

    ``released`` is set by the test's watchdog only if ollm never stops waiting: then
    the test fails instead of hanging for ever.
    """

    def __init__(self, *replies: Reply | str) -> None:
        super().__init__(*replies)
        self.released = threading.Event()
        self.log: list[str] = []

    async def _hold(self, what: str) -> None:
        try:
            while not self.released.is_set():
                await anyio.sleep(0.01)
            self.log.append(f"{what} released by the watchdog")
        except anyio.get_cancelled_exc_class():
            self.log.append(f"{what} cut short")
            raise

    async def aclose(self) -> None:
        await self._hold("close")
        await super().aclose()


def watchdog(provider: Stubborn) -> threading.Timer:
    timer = threading.Timer(60.0, provider.released.set)
    timer.daemon = True
    timer.start()
    return timer


@pytest.mark.parametrize("backend", BACKENDS)
def test_closing_waits_for_the_providers_no_longer_than_close_timeout(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    provider = Stubborn("one")
    registries = ollm.Registries()
    registries.providers.register(ollm.ProviderSpec("stubborn", lambda: provider))
    sync = ollm.SyncChatClient(ollm.ChatClient(registries), backend=backend, close_timeout=0.1)
    assert sync.run("hi").text == "one"
    timer = watchdog(provider)
    before = loop_threads()
    sync.close()
    timer.cancel()
    assert provider.log == ["close cut short"]
    assert loop_threads() == before - 1
    [warning] = [r for r in caplog.records if r.name == "ollm.runtime.sync"]
    assert warning.getMessage() == (
        "the chat client's providers and toolsets did not close within 0.1 seconds;"
        " they were left behind"
    )


class Deaf(Stubborn):
    """Says it watches the abort signal, and does not: a chat on it ends only when cut."""

    handles_abort = True

    async def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[Any]:
        yield ollm.TextEvent("Hello")
        os.kill(os.getpid(), signal.SIGINT)  # lands in the caller, waiting for the next event
        await self._hold("reply")
        yield ollm.FinishEvent("stop")


@pytest.mark.parametrize("backend", BACKENDS)
def test_after_ctrl_c_a_chat_that_will_not_end_is_cut_after_close_timeout(backend: str) -> None:
    provider = Deaf("next")
    client = ollm.ChatClient(ollm.Registries(), provider=provider)
    timer = watchdog(provider)
    with ollm.SyncChatClient(client, backend=backend, close_timeout=0.1) as sync:
        with pytest.raises(KeyboardInterrupt):
            for _ in sync.chat("one"):
                pass
        timer.cancel()
        assert provider.log == ["reply cut short"]
        last = sync.conversation.messages[-1]
        assert (last.text, last.incomplete) == ("Hello", True)
        assert_history_valid(sync.conversation)


class Collector:
    """A toolset whose background task runs the garbage collector when told to.

    Long-lived toolsets (an MCP server's reader) run tasks on the client's own loop, so
    a client dropped in a reference cycle can be collected on its own loop's thread.
    """

    def __init__(self) -> None:
        self.name = "collector"
        self.collect = threading.Event()

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[Sequence[ollm.Tool]]:
        async def collect_when_told() -> None:
            while not self.collect.is_set():
                await anyio.sleep(0.01)
            gc.collect()

        async with anyio.create_task_group() as group:
            group.start_soon(collect_when_told)
            yield [ollm.Tool.from_function(lambda: "ok", name="noop")]
            group.cancel_scope.cancel()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_client_collected_on_its_own_loop_thread_still_closes_and_stops(backend: str) -> None:
    provider = ScriptedProvider("one")
    registries = ollm.Registries()
    registries.providers.register(ollm.ProviderSpec("scripted", lambda: provider))
    collector = Collector()
    sync = ollm.SyncChatClient(ollm.ChatClient(registries, tools=[collector]), backend=backend)
    assert sync.run("hi").text == "one"
    [thread] = [t for t in threading.enumerate() if t.name == "ollm-sync-loop" and t.is_alive()]
    sync.cycle = sync  # type: ignore[attr-defined]  # only the collector can free it now
    del sync
    gc.disable()  # until the loop's own thread collects it
    try:
        collector.collect.set()
        thread.join(60.0)
    finally:
        gc.enable()
    assert not thread.is_alive()
    assert provider.closed


@pytest.mark.parametrize("backend", BACKENDS)
def test_closing_while_another_thread_reads_a_chat_ends_that_chat(backend: str) -> None:
    """The chat waiting in the loop is cancelled, not waited for; its history stays whole."""
    provider = ScriptedProvider(Reply("Hello", hang=True))
    sync = ollm.SyncChatClient(
        ollm.ChatClient(ollm.Registries(), provider=provider), backend=backend
    )
    seen: list[str] = []
    first = threading.Event()

    def read() -> None:
        try:
            for event in sync.chat("hi"):
                seen.append(type(event).__name__)
                first.set()
        except RuntimeError as exc:
            seen.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    first.wait()
    closer = threading.Thread(target=sync.close, daemon=True)  # a hang fails the test only
    closer.start()
    closer.join(60.0)
    reader.join(60.0)
    assert not closer.is_alive()
    assert seen == ["TextEvent", "this SyncChatClient is closed"]
    last = sync.conversation.messages[-1]
    assert (last.text, last.incomplete) == ("Hello", True)
