"""ChatClient examples: history, cancellation in every form, limits, errors, sync facade."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, client, collect

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


async def test_history_carries_across_chats(anyio_backend: str) -> None:
    provider = ScriptedProvider("Hello!", "Your name is Ada.")
    chat_client = client(provider, system="Be brief.")
    await collect(chat_client.chat("I am Ada."))
    await collect(chat_client.chat("What is my name?"))
    second = provider.requests[1]
    assert second.system_prompt == "Be brief."
    assert [m.text for m in second.messages] == ["I am Ada.", "Hello!", "What is my name?"]
    assert len(chat_client.conversation) == 4


async def test_run_returns_the_final_text_new_messages_usage_and_reason(anyio_backend: str) -> None:
    @ollm.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    provider = ScriptedProvider(
        Reply("Let me add.", tool_calls=[("add", {"a": 2, "b": "3"})], usage=ollm.Usage(10, 2, 12)),
        Reply(["It is ", "5."], usage=ollm.Usage(20, 3, 23)),
    )
    result = await client(provider, tools=[add]).run("2+3?")
    assert result.ok
    assert result.text == "It is 5."
    assert result.finish_reason == "stop"
    assert result.usage == ollm.Usage(30, 5, 35)
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert [r.result for r in result.tool_results] == ["5"]
    assert result.raise_for_error() is result


async def test_run_reports_errors_and_raise_for_error_raises_the_typed_error(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(Reply.connection_error())
    result = await client(provider).run("hi")
    assert not result.ok
    assert result.finish_reason == "error"
    assert result.error is not None
    assert result.error.code == "CONNECTION_FAILED"
    with pytest.raises(ollm.ConnectionFailedError):
        result.raise_for_error()


async def test_a_conversation_runs_one_chat_at_a_time(anyio_backend: str) -> None:
    provider = ScriptedProvider(Reply.hanging("..."), "second")
    chat_client = client(provider)
    first = chat_client.chat("one")
    async with first:
        async for _ in first:
            with pytest.raises(ollm.ConversationBusyError, match="already has a chat"):
                await collect(chat_client.chat("two"))
            break
    assert not chat_client.conversation.busy
    # Another conversation is free to run meanwhile.
    other = ollm.Conversation()
    assert (await chat_client.run("two", conversation=other)).text == "second"


async def test_breaking_out_early_closes_the_stream_and_keeps_the_partial_reply(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(Reply(["one ", "two ", "three"]))
    chat_client = client(provider)
    async with chat_client.chat("count") as stream:
        async for event in stream:
            if isinstance(event, ollm.TextEvent) and event.text == "two ":
                break
    assert provider.open_streams == 0
    last = chat_client.conversation.messages[-1]
    assert last.role == "assistant"
    assert last.text == "one two "
    assert last.incomplete


async def test_a_cancel_scope_around_the_iteration_stops_the_chat_cleanly(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(Reply.hanging(["partial ", "answer"]))
    chat_client = client(provider)
    seen: list[ollm.ChatEvent] = []
    with anyio.move_on_after(0.2) as scope:
        async with chat_client.chat("hang") as stream:
            async for event in stream:
                seen.append(event)
    assert scope.cancelled_caught
    assert [e.text for e in seen if isinstance(e, ollm.TextEvent)] == ["partial ", "answer"]
    assert provider.open_streams == 0
    assert not chat_client.conversation.busy
    assert chat_client.conversation.messages[-1].incomplete
    provider.add("fine")
    assert (await chat_client.run("again")).text == "fine"


async def test_an_abort_from_another_os_thread_stops_a_hanging_provider(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(Reply.hanging("waiting"))
    chat_client = client(provider)
    stream = chat_client.chat("hang")
    timer = threading.Timer(0.1, stream.abort)
    timer.start()
    events = await collect(stream)
    timer.join()
    assert_one_finish_last(events, "cancelled")
    assert chat_client.conversation.messages[-1] == ollm.Message.assistant(
        "waiting", incomplete=True
    )


class _Deaf:
    """A provider that ignores the abort signal (the runtime must guard it)."""

    name = "deaf"
    default_model = "m"

    def __init__(self) -> None:
        self.closed = False
        self.waiting = anyio.Event()

    async def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        try:
            yield ollm.TextEvent("hmm")
            self.waiting.set()
            await anyio.sleep_forever()
        finally:
            self.closed = True


async def test_an_abort_stops_even_a_provider_that_does_not_watch_the_signal(
    anyio_backend: str,
) -> None:
    provider = _Deaf()
    signal = ollm.AbortSignal()
    chat_client = client(provider)  # type: ignore[arg-type]
    events: list[ollm.ChatEvent] = []
    async with anyio.create_task_group() as group:
        group.start_soon(_abort_when, provider.waiting, signal)
        events = await collect(chat_client.chat("x", abort=signal))
    assert_one_finish_last(events, "cancelled")
    assert provider.closed


async def _abort_when(ready: anyio.Event, signal: ollm.AbortSignal) -> None:
    await ready.wait()  # the provider is deaf and waiting: now abort
    signal.abort()


async def test_a_provider_error_midstream_keeps_the_partial_text_and_the_chat_can_go_on(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(Reply.error_midstream(["Hel", "lo"]), "Hello again")
    chat_client = client(provider)
    events = await collect(chat_client.chat("hi"))
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert [e.code for e in errors] == ["STREAM_INTERRUPTED"]
    assert_one_finish_last(events, "error")
    assert chat_client.conversation.messages[-1] == ollm.Message.assistant("Hello", incomplete=True)
    assert (await chat_client.run("again")).text == "Hello again"


async def test_thinking_is_kept_with_the_reply(anyio_backend: str) -> None:
    provider = ScriptedProvider(Reply("42", thinking=["Let me ", "think."]))
    chat_client = client(provider)
    events = await collect(chat_client.chat("answer?"))
    assert [e.text for e in events if isinstance(e, ollm.ThinkingEvent)] == ["Let me ", "think."]
    assert chat_client.conversation.messages[-1].thinking == "Let me think."


async def test_a_slow_tool_times_out_and_the_model_is_told(anyio_backend: str) -> None:
    @ollm.tool
    async def slow() -> str:
        """Never finishes in time."""
        await anyio.sleep(10)
        return "late"

    provider = ScriptedProvider(Reply(tool_calls=[("slow", {})]), "ok")
    events = await collect(client(provider, tools=[slow], tool_timeout=0.05).chat("go"))
    result = next(e for e in events if isinstance(e, ollm.ToolCallResultEvent))
    assert result.is_error
    assert result.error_code == "TOOL_TIMEOUT"
    assert result.result == "Tool 'slow' did not finish within 0.05 seconds."
    assert_one_finish_last(events, "stop")


async def test_tool_calls_beyond_the_chat_limit_are_refused(anyio_backend: str) -> None:
    @ollm.tool
    def ping() -> str:
        """Ping."""
        return "pong"

    provider = ScriptedProvider(Reply(tool_calls=[("ping", {})] * 3), "done")
    events = await collect(client(provider, tools=[ping], max_tool_calls=2).chat("go"))
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.error_code for r in results] == [None, None, "TOOL_LIMIT"]
    assert "limit of 2 tool calls" in results[2].result


async def test_unknown_or_disabled_tools_get_a_result_listing_the_enabled_ones(
    anyio_backend: str,
) -> None:
    @ollm.tool
    def get_weather(city: str) -> str:
        """Weather."""
        return "sunny"

    provider = ScriptedProvider(Reply(tool_calls=[("get_wether", {"city": "x"})]), "ok")
    events = await collect(client(provider, tools=[get_weather]).chat("go"))
    result = next(e for e in events if isinstance(e, ollm.ToolCallResultEvent))
    assert result.error_code == "TOOL_NOT_FOUND"
    assert result.result == (
        "Tool 'get_wether' is not available. Did you mean 'get_weather'? "
        "Available tools: get_weather."
    )


@pytest.mark.parametrize(
    ("kwargs", "code", "text"),
    [
        ({"provider": "nope"}, "PROVIDER_NOT_FOUND", "'nope' is not installed"),
        ({"tools": ["missing_tool"]}, "TOOL_NOT_FOUND", "'missing_tool' is not available"),
        (
            {"model": ""},
            "INVALID_REQUEST",
            "No model chosen. Pass model=... (for example model='llama3.2'), or run: ollm chat -m "
            "MODEL",
        ),
    ],
)
async def test_configuration_errors_are_events_not_exceptions(
    anyio_backend: str, kwargs: dict[str, Any], code: str, text: str
) -> None:
    registries = ollm.Registries()
    provider = ScriptedProvider("x", default_model=None)
    registries.providers.register(provider)
    settings: dict[str, Any] = {"model": "m", **kwargs}
    events = await collect(ollm.ChatClient(registries, **settings).chat("hi"))
    error = next(e for e in events if isinstance(e, ollm.ErrorEvent))
    assert error.code == code
    assert text in error.message
    assert_one_finish_last(events, "error")


async def test_misuse_by_the_caller_raises_at_once(anyio_backend: str) -> None:
    chat_client = client(ScriptedProvider("x"))
    with pytest.raises(TypeError, match="tools must be a list"):
        chat_client.chat("x", tools="calculate")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AbortSignal"):
        chat_client.chat("x", abort=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_turns"):
        chat_client.chat("x", max_turns=0)
    with pytest.raises(TypeError, match="prompt must be"):
        chat_client.chat([1, 2])  # type: ignore[list-item]
    with pytest.raises(ollm.InvalidToolError):
        chat_client.chat("x", tools=[lambda x: x])


async def test_a_prompt_with_an_image_and_a_prompt_of_none(anyio_backend: str) -> None:
    provider = ScriptedProvider("a cat", "still a cat")
    chat_client = client(provider)
    image = ollm.ImagePart(b"png", "image/png")
    await collect(chat_client.chat([ollm.TextPart("what is this?"), image]))
    assert provider.requests[0].messages[0].images == (image,)
    await collect(chat_client.chat(None))
    # None sends the conversation as it stands, without a new user message.
    assert len(provider.requests[1].messages) == 2


async def test_the_context_window_comes_from_the_provider_when_not_configured(
    anyio_backend: str,
) -> None:
    capabilities = ollm.ModelCapabilities(context_window=10)
    provider = ScriptedProvider("never", capabilities=capabilities)
    events = await collect(client(provider).chat("x" * 100))
    assert [e.code for e in events if isinstance(e, ollm.ErrorEvent)] == ["TOKEN_LIMIT"]
    # ...and configuration wins over the provider, and is sent as the context window.
    provider2 = ScriptedProvider("fits", capabilities=capabilities)
    result = await client(provider2, context_window=1000).run("x" * 100)
    assert result.text == "fits"
    assert provider2.requests[0].options.context_window == 1000


async def test_without_any_window_the_default_is_4096_tokens(anyio_backend: str) -> None:
    provider = ScriptedProvider("never")
    events = await collect(client(provider).chat("x" * (4 * 4097)))
    error = next(e for e in events if isinstance(e, ollm.ErrorEvent))
    assert "allows 4096" in error.message
    assert provider.requests == []


async def test_the_sync_client_runs_and_streams_on_both_backends(anyio_backend: str) -> None:
    provider = ScriptedProvider("one", Reply(["t", "w", "o"]), Reply(["a", "b", "c"]))

    def use() -> tuple[str, list[str], str]:
        with ollm.SyncChatClient(client(provider), backend=anyio_backend) as sync:
            first = sync.run("1").text
            texts = [e.text for e in sync.chat("2") if isinstance(e, ollm.TextEvent)]
            for event in sync.chat("3"):
                if isinstance(event, ollm.TextEvent):
                    break  # closes the chat
            return first, texts, sync.conversation.messages[-1].text

    first, texts, last = await anyio.to_thread.run_sync(use)
    assert (first, texts) == ("one", ["t", "w", "o"])
    assert last == "a"
    assert provider.open_streams == 0


async def test_eight_tools_of_one_turn_run_at_the_same_time(anyio_backend: str) -> None:
    """Four sync and four async tools: each waits until all eight are running.

    Proven with a barrier, not a clock: if the runtime ran them one after another, the
    first would wait at the barrier for the others and fail (its timeout only detects
    that hang; nothing here is timed).
    """
    barrier = threading.Barrier(8, timeout=30)

    @ollm.tool
    async def wait_async(i: int) -> int:
        """Wait for the others."""
        await anyio.to_thread.run_sync(barrier.wait)
        return i

    @ollm.tool
    def wait_sync(i: int) -> int:
        """Wait for the others, in a thread."""
        barrier.wait()
        return i

    calls = [("wait_async" if i % 2 else "wait_sync", {"i": i}) for i in range(8)]
    provider = ScriptedProvider(Reply(tool_calls=calls), "done")
    chat_client = client(provider, tools=[wait_async, wait_sync])
    events = await collect(chat_client.chat("go"))
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.result for r in results] == [str(i) for i in range(8)]
    assert not any(r.is_error for r in results)
    assert_history_valid(chat_client.conversation)


class _RaisesAtOnce:
    """A provider whose chat_stream raises before it returns an iterator."""

    name = "eager"
    default_model = "m"

    def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        raise ollm.ConnectionFailedError("The server is down. Start it.")


async def test_a_provider_that_raises_at_once_is_an_error_event(anyio_backend: str) -> None:
    chat_client = client(_RaisesAtOnce())  # type: ignore[arg-type]
    events = await collect(chat_client.chat("hi"))
    assert [e.code for e in events if isinstance(e, ollm.ErrorEvent)] == ["CONNECTION_FAILED"]
    assert_one_finish_last(events, "error")


async def test_a_strategy_that_fails_to_start_is_a_plugin_error(anyio_backend: str) -> None:
    def broken() -> ollm.ToolStrategy:
        raise RuntimeError("missing model file")

    registries = ollm.Registries()
    registries.strategies.register(ollm.StrategySpec("broken", broken))

    @ollm.tool
    def noop() -> str:
        """Nothing."""
        return ""

    chat_client = ollm.ChatClient(
        registries, provider=ScriptedProvider("x"), tools=[noop], tool_strategy="broken"
    )
    events = await collect(chat_client.chat("hi"))
    error = next(e for e in events if isinstance(e, ollm.ErrorEvent))
    assert error.code == "PLUGIN_ERROR"
    assert "'broken' failed to start: RuntimeError: missing model file" in error.message
