"""The runtime's correctness properties (4-9, 22-29, 32, 34, 35), on asyncio and trio."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from ollm_strategies import args, messages, names, texts
from runtime_helpers import assert_history_valid, assert_one_finish_last, client, collect

import ollm
from ollm.registries import request_text
from ollm.runtime import count_request_tokens
from ollm_testutils.mock import FunctionProvider, Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


@st.composite
def turn_events(draw: st.DrawFn) -> list[ollm.ProviderEvent]:
    """One reply: text, thinking, notices and tool calls (unique ids), then finish or error."""
    body = draw(
        st.lists(
            st.one_of(
                st.builds(ollm.TextEvent, texts),
                st.builds(ollm.ThinkingEvent, texts),
                st.builds(ollm.NoticeEvent, texts, names),
                st.builds(ollm.ToolCall, st.just(""), st.just("echo"), args).map(
                    ollm.ToolCallEvent
                ),
            ),
            max_size=12,
        )
    )
    calls = 0
    for index, event in enumerate(body):
        if isinstance(event, ollm.ToolCallEvent):
            calls += 1
            body[index] = ollm.ToolCallEvent(
                ollm.ToolCall(f"id{calls}", event.call.name, event.call.args)
            )
    ending = draw(
        st.one_of(
            st.builds(ollm.FinishEvent, st.sampled_from(["stop", "length"])),
            st.builds(ollm.ErrorEvent, texts, st.sampled_from(["PROVIDER_ERROR", "BAD_RESPONSE"])),
        )
    )
    return [*body, ending]


def echo(**kwargs: Any) -> str:
    """Echo the arguments."""
    return repr(sorted(kwargs))


echo_tool = ollm.Tool.from_schema(ollm.ToolSchema("echo", "Echo."), echo)


@given(turn_events())
async def test_property_4_and_28_provider_events_reach_the_consumer_in_order(
    anyio_backend: str, events: list[ollm.ProviderEvent]
) -> None:
    """Property 4: events reach the consumer in the same order with the same content.

    Property 28: a turn forwards every provider event until a finish or an error (events
    after it are not forwarded).
    """
    trailing = [ollm.TextEvent("after the end")]
    provider = ScriptedProvider(Reply.from_events([*events, *trailing]), Reply("done"))
    chat = await collect(client(provider, tools=[echo_tool]).chat("go"))

    expected: list[Any] = []
    for event in events:
        if isinstance(event, ollm.ToolCallEvent):
            expected.append(("call", event.call))
        elif isinstance(event, ollm.FinishEvent):
            expected.append(("finish", event.reason))
        elif isinstance(event, ollm.ErrorEvent):
            expected.append(("error", event.message, event.code))
        else:
            expected.append(event)
    seen: list[Any] = []
    for event in chat:
        if isinstance(event, ollm.ToolCallStartEvent):
            seen.append(("call", event.call))
        elif isinstance(event, ollm.TurnCompleteEvent) and event.turn == 1:
            seen.append(("finish", event.reason))
        elif isinstance(event, ollm.ErrorEvent):
            seen.append(("error", event.message, event.code))
        elif isinstance(event, (ollm.TextEvent, ollm.ThinkingEvent, ollm.NoticeEvent)):
            seen.append(event)
        if isinstance(event, (ollm.TurnCompleteEvent, ollm.ErrorEvent)):
            break
    assert seen == expected
    assert ollm.TextEvent("after the end") not in chat
    assert_one_finish_last(chat)


@given(st.integers(0, 28), st.booleans(), st.booleans())
async def test_property_5_and_34_abort_anywhere_ends_cancelled_leaving_nothing_behind(
    anyio_backend: str, abort_at: int, from_thread: bool, during_tools: bool
) -> None:
    """Property 5: an abort during a chat ends it with a cancellation finish.

    Property 34: it leaves no open stream and no running task behind.
    """
    started: list[str] = []

    @ollm.tool
    async def slow(n: int) -> str:
        """Slow tool."""
        started.append("slow")
        await anyio.sleep(0.5 if during_tools else 0)
        return str(n)

    provider = ScriptedProvider(
        Reply([f"a{i} " for i in range(10)], tool_calls=[("slow", {"n": 1}), ("slow", {"n": 2})]),
        Reply([f"b{i} " for i in range(10)], delay=0.001, tool_calls=[("slow", {"n": 3})]),
        # The chat never ends on its own: only the abort ends it.
        Reply.hanging(["c "]),
    )
    chat_client = client(provider, tools=[slow])
    stream = chat_client.chat("go")
    tasks_before = {t.id for t in anyio.get_running_tasks()}
    events: list[ollm.ChatEvent] = []
    async with stream:
        async for event in stream:
            events.append(event)
            trigger = (
                isinstance(event, ollm.ToolCallStartEvent)
                if during_tools
                else len(events) > abort_at
            )
            if trigger and not stream.signal.aborted:
                if from_thread:
                    await anyio.to_thread.run_sync(stream.abort)
                else:
                    stream.abort()
    assert_one_finish_last(events, "cancelled")
    assert provider.open_streams == 0
    assert {t.id for t in anyio.get_running_tasks()} <= tasks_before
    assert_history_valid(chat_client.conversation)
    # The conversation stays usable.
    provider.add(Reply("again"))
    assert not chat_client.conversation.busy


@given(st.lists(args, min_size=1, max_size=5))
async def test_property_6_tool_calls_run_after_the_stream_ends(
    anyio_backend: str, call_args: list[dict[str, Any]]
) -> None:
    """Property 6: every tool call of a turn is queued and executed after the stream ends."""
    log: list[str] = []

    async def replies(request: ollm.ProviderRequest) -> Any:
        if len(request.messages) > 1:
            return Reply("finished")

        async def stream() -> Any:
            try:
                for index, arguments in enumerate(call_args):
                    yield ollm.ToolCallEvent(ollm.ToolCall(f"c{index}", "record", arguments))
                    log.append("emitted")
                yield ollm.FinishEvent("stop")
            finally:
                log.append("stream-closed")

        return stream()

    def record(**kwargs: Any) -> str:
        log.append("tool")
        return "ok"

    tool = ollm.Tool.from_schema(ollm.ToolSchema("record"), record)
    events = await collect(client(FunctionProvider(replies), tools=[tool]).chat("go"))
    assert log.count("tool") == len(call_args)
    first_tool = log.index("tool")
    assert "stream-closed" in log[:first_tool]
    assert log.count("emitted") == len(call_args)
    assert_one_finish_last(events, "stop")


@given(st.lists(args, min_size=1, max_size=4), st.lists(messages(), max_size=4))
async def test_property_7_27_29_tool_results_enter_the_history_the_next_turn_sees(
    anyio_backend: str, call_args: list[dict[str, Any]], earlier: list[ollm.Message]
) -> None:
    """Property 7: each tool result enters the history as a tool message; the next turn sees it.

    Property 27: a turn starts from the conversation as it stands.
    Property 29: after a turn, the history holds the reply (with its calls) and every result.
    """
    # A history whose calls have no results is refused before sending (INVALID_HISTORY).
    earlier = [m for m in earlier if m.role != "tool" and not m.tool_calls]
    calls = [("echo", a) for a in call_args]
    provider = ScriptedProvider(Reply("thinking about it", tool_calls=calls), Reply("answer"))
    conversation = ollm.Conversation(earlier)
    chat_client = client(provider, tools=[echo_tool], conversation=conversation)
    await collect(chat_client.chat("question"))

    first, second = provider.requests
    assert first.messages == (*earlier, ollm.Message.user("question"))
    history = conversation.messages
    assistant = history[len(earlier) + 1]
    assert assistant.role == "assistant"
    assert assistant.text == "thinking about it"
    assert [c.args for c in assistant.tool_calls] == call_args
    tool_messages = history[len(earlier) + 2 : len(earlier) + 2 + len(calls)]
    assert [m.tool_call_id for m in tool_messages] == [c.id for c in assistant.tool_calls]
    assert all(m.role == "tool" and m.name == "echo" for m in tool_messages)
    assert second.messages == history[: len(earlier) + 2 + len(calls)]
    assert history[-1] == ollm.Message.assistant("answer")


@given(st.integers(2, 8))
async def test_property_8_the_calls_of_one_turn_run_at_the_same_time(
    anyio_backend: str, count: int
) -> None:
    """Property 8: several calls of one turn run concurrently.

    Each tool waits until every call of the turn has started: that can only finish if they
    all run at once (one after the other, the first would wait forever, and time out).
    """
    entered = 0
    all_in = anyio.Event()

    async def meet(index: int) -> str:
        nonlocal entered
        entered += 1
        if entered == count:
            all_in.set()
        with anyio.fail_after(5):
            await all_in.wait()
        return "met"

    def sync_meet(index: int) -> str:
        return anyio.from_thread.run(meet, index)

    tools = [
        ollm.Tool.from_function(meet, name="meet"),
        ollm.Tool.from_function(sync_meet, name="sync_meet"),
    ]
    calls = [("meet" if i % 2 else "sync_meet", {"index": i}) for i in range(count)]
    provider = ScriptedProvider(Reply(tool_calls=calls), Reply("done"))
    events = await collect(client(provider, tools=tools).chat("go"))
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.result for r in results] == ["met"] * count
    assert [r.call.args["index"] for r in results] == list(range(count))


@given(st.integers(1, 6))
async def test_property_9_a_chat_that_would_go_on_forever_stops_at_max_turns(
    anyio_backend: str, max_turns: int
) -> None:
    """Property 9: it stops after the maximum number of turns with reason max_turns."""
    provider = ScriptedProvider(Reply(tool_calls=[("echo", {})]), repeat_last=True)
    chat_client = client(provider, tools=[echo_tool], max_turns=max_turns)
    events = await collect(chat_client.chat("loop"))
    assert_one_finish_last(events, "max_turns")
    assert len(provider.requests) == max_turns
    assert_history_valid(chat_client.conversation)


@given(st.lists(messages(), max_size=5), st.text(max_size=100), st.booleans())
async def test_property_22_23_the_estimate_is_positive_and_the_provider_counts_first(
    anyio_backend: str, history: list[ollm.Message], system: str, counting: bool
) -> None:
    """Property 22: the estimate for any request is a positive integer.

    Property 23: a provider that counts tokens is asked instead of the fallback.
    """
    asked: list[ollm.ProviderRequest] = []

    def counter(request: ollm.ProviderRequest) -> int:
        asked.append(request)
        return 7

    provider = ScriptedProvider(Reply("ok"), token_counter=counter if counting else None)
    request = ollm.ProviderRequest("m", (*history, ollm.Message.user("x")), system_prompt=system)
    estimate = await count_request_tokens(request, provider, ollm.TokenCounterRegistry())
    assert isinstance(estimate, int)
    assert estimate >= 1
    if counting:
        assert estimate == 7
        assert asked == [request]
    else:
        assert estimate == max(1, math.ceil(len(request_text(request)) / 4))


@given(st.integers(100, 4000), st.floats(0.9, 1.0))
async def test_property_25_between_90_and_100_percent_the_chat_warns(
    anyio_backend: str, window: int, fill: float
) -> None:
    """Property 25: between 90% and 100% of the model's limit, the chat warns (and sends)."""
    tokens = max(math.ceil(window * 0.9), min(window, int(window * fill)))
    provider = ScriptedProvider(Reply("ok"), token_counter=lambda request: tokens)
    events = await collect(client(provider, context_window=window).chat("x"))
    warnings = [e for e in events if isinstance(e, ollm.TokenWarningEvent)]
    assert warnings == [ollm.TokenWarningEvent(tokens, window, window)]
    assert len(provider.requests) == 1
    assert_one_finish_last(events, "stop")


@given(st.integers(10, 4000), st.integers(1, 1000), st.integers(0, 200))
async def test_property_26_above_the_limit_nothing_is_sent(
    anyio_backend: str, window: int, excess: int, reserved: int
) -> None:
    """Property 26: above the limit the request is blocked with an error before anything is sent.

    The request's max_tokens is reserved for the output.
    """
    limit = max(0, window - reserved)
    provider = ScriptedProvider(Reply("never"), token_counter=lambda request: limit + excess)
    options = ollm.GenerationOptions(max_tokens=reserved or None)
    chat_client = client(provider, context_window=window, options=options)
    events = await collect(chat_client.chat("x"))
    assert provider.requests == []
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert [e.code for e in errors] == ["TOKEN_LIMIT"]
    assert "Nothing was sent" in errors[0].message
    assert_one_finish_last(events, "token_limit")
    assert chat_client.conversation.messages == (ollm.Message.user("x"),)


def _failing(kind: str) -> Any:
    def fail(**kwargs: Any) -> str:
        if kind == "value":
            raise ValueError("bad value")
        if kind == "exit":
            raise SystemExit(3)
        if kind == "keyerror":
            raise KeyError("k")
        return "fine"

    return fail


@given(st.lists(st.sampled_from(["value", "exit", "keyerror", "ok"]), min_size=1, max_size=5))
async def test_property_32_a_failing_tool_becomes_an_error_result_and_the_chat_goes_on(
    anyio_backend: str, kinds: list[str]
) -> None:
    """Property 32: a failing tool becomes an error result in its tool message; the chat goes on."""
    tools = [
        ollm.Tool.from_schema(ollm.ToolSchema(f"t_{kind}"), _failing(kind)) for kind in set(kinds)
    ]
    provider = ScriptedProvider(
        Reply(tool_calls=[(f"t_{kind}", {}) for kind in kinds]), Reply("recovered")
    )
    chat_client = client(provider, tools=tools)
    events = await collect(chat_client.chat("go"))
    assert_one_finish_last(events, "stop")
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.is_error for r in results] == [kind != "ok" for kind in kinds]
    for result in results:
        if result.is_error:
            assert result.error_code == "TOOL_FAILED"
            assert result.result.startswith(f"Tool '{result.call.name}' failed: ")
    tool_messages = [m for m in chat_client.conversation.messages if m.role == "tool"]
    assert [m.is_error for m in tool_messages] == [kind != "ok" for kind in kinds]
    assert len(provider.requests) == 2


class Boom(Exception):
    pass


@given(
    st.sampled_from(["raise-first", "raise-later", "yield-junk", "tool-raises-base", "strategy"]),
    st.integers(0, 3),
)
async def test_property_35_no_unexpected_error_escapes_the_event_stream(
    anyio_backend: str, where: str, after: int
) -> None:
    """Property 35: no unexpected error escapes: it becomes an error event; life goes on."""

    async def replies(request: ollm.ProviderRequest) -> Any:
        async def stream() -> Any:
            for index in range(after):
                yield ollm.TextEvent(f"t{index} ")
            if where == "raise-first" or where == "raise-later":
                raise Boom("provider bug")
            if where == "yield-junk":
                yield {"type": "text"}
            yield ollm.ToolCallEvent(ollm.ToolCall("c", "explode", {}))
            yield ollm.FinishEvent("stop")

        if len(request.messages) > 2:
            return Reply("recovered")
        return stream()

    def explode() -> str:
        raise BaseExceptionGroup("group", [Boom("in a group")])

    class BadStrategy(ollm.NativeStrategy):
        name = "bad"

        def review(self, reply: ollm.Message) -> ollm.ReplyReview | None:
            raise Boom("strategy bug")

    registries = ollm.Registries()
    registries.strategies.register(ollm.StrategySpec("bad", BadStrategy))
    chat_client = ollm.ChatClient(
        registries,
        provider=FunctionProvider(replies),
        tools=[ollm.Tool.from_function(explode)],
        tool_strategy="bad" if where == "strategy" else "auto",
    )
    events = await collect(chat_client.chat("go"))
    assert_one_finish_last(events)
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    if where == "tool-raises-base":
        results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
        assert results[0].is_error
        assert "in a group" in results[0].result
    else:
        assert len(errors) == 1
        assert events[-1] == ollm.FinishEvent("error", ollm.Usage())
        assert errors[0].code in ("PROVIDER_ERROR", "BAD_RESPONSE", "INTERNAL_ERROR")
    assert_history_valid(chat_client.conversation)
    # The conversation is still usable: another chat runs on it.
    follow_up = await collect(chat_client.chat("again", tool_strategy="auto"))
    assert_one_finish_last(follow_up)
