"""The runtime at its edges: from the mutation run of ``ollm.runtime`` (tests/MUTATION.md).

A provider's stream that raises or yields something else, a provider that does not
watch the abort signal being closed even while its chat is cancelled, and toolsets
that clash, give the wrong thing, stop on their own, fail to stop, or are closed before
they started.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, collect

import ollm
from ollm.runtime.toolsets import ToolsetSessions
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


class Plain:
    """A provider written by hand, as a third party would: it does not watch the abort."""

    default_model = "plain-model"
    handles_abort = False

    def __init__(self, *items: object, fail: Exception | None = None) -> None:
        self.name = "plain"
        self.items = items
        self.fail = fail
        self.log: list[str] = []
        self.waiting = anyio.Event()

    async def model_capabilities(self, model: str) -> ollm.ModelCapabilities:
        return ollm.ModelCapabilities()

    async def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[Any]:
        try:
            for item in self.items:
                yield item
            if self.fail is not None:
                raise self.fail
            self.waiting.set()
            await anyio.sleep_forever()
        finally:
            # Cleanup that awaits (closing a connection) is shielded, as docs/plugins.md
            # says: the runtime stops such a provider by cancelling its wait.
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0)
                self.log.append("cleaned up")


def plain_client(provider: Plain) -> ollm.ChatClient:
    return ollm.ChatClient(ollm.Registries(), provider=provider)


@pytest.mark.parametrize(
    ("fail", "message", "code"),
    [
        (ValueError("boom"), "Provider 'plain' failed: ValueError: boom", "PROVIDER_ERROR"),
        (KeyError(), "Provider 'plain' failed: KeyError", "PROVIDER_ERROR"),
        (
            ollm.ProviderError("The server said no.", code="MY_CODE"),
            "The server said no.",
            "MY_CODE",
        ),
    ],
)
async def test_a_provider_that_raises_ends_the_chat_with_what_it_said(
    anyio_backend: str, fail: Exception, message: str, code: str
) -> None:
    chat_client = plain_client(Plain(ollm.TextEvent("Hel"), fail=fail))
    events = await collect(chat_client.chat("hi"))
    assert_one_finish_last(events, "error")
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert (error.message, error.code) == (message, code)
    result = await plain_client(Plain(fail=fail)).run("hi")
    with pytest.raises(ollm.OllmError) as caught:
        result.raise_for_error()
    assert (caught.value.message, caught.value.code) == (message, code)
    assert_history_valid(chat_client.conversation)


async def test_a_provider_that_yields_something_else_is_a_bad_response(
    anyio_backend: str,
) -> None:
    events = await collect(plain_client(Plain("just text")).chat("hi"))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "BAD_RESPONSE"
    assert error.message == "Provider 'plain' yielded str, which is not a provider event."


async def test_a_provider_that_ignores_the_abort_is_stopped_and_cleans_up(
    anyio_backend: str,
) -> None:
    provider = Plain(ollm.TextEvent("Hello"))
    chat_client = plain_client(provider)
    stream = chat_client.chat("hi")
    async with anyio.create_task_group() as group:

        async def abort_when_waiting() -> None:
            await provider.waiting.wait()
            stream.abort()

        group.start_soon(abort_when_waiting)
        events = await collect(stream)
    assert_one_finish_last(events, "cancelled")
    assert provider.log == ["cleaned up"]
    assert chat_client.conversation.messages[-1].text == "Hello"


async def test_a_provider_stream_left_after_its_finish_is_closed_at_once(
    anyio_backend: str,
) -> None:
    provider = Plain(ollm.TextEvent("Hello"), ollm.FinishEvent("stop"), ollm.TextEvent("more"))
    result = await plain_client(provider).run("hi")
    assert result.text == "Hello"
    assert provider.log == ["cleaned up"]  # not left for the garbage collector


async def test_a_provider_is_cleaned_up_when_its_chat_is_cancelled_from_outside(
    anyio_backend: str,
) -> None:
    provider = Plain(ollm.TextEvent("Hello"))
    chat_client = plain_client(provider)
    with anyio.CancelScope() as outside:

        async def cancel_when_waiting() -> None:
            await provider.waiting.wait()
            outside.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(cancel_when_waiting)
            await collect(chat_client.chat("hi"))
    assert provider.log == ["cleaned up"]  # its cleanup could await: it was shielded
    assert_history_valid(chat_client.conversation)


# -- toolsets --------------------------------------------------------------------------


def _tool(name: str) -> ollm.Tool:
    def run() -> str:
        """Run."""
        return name

    return ollm.Tool.from_function(run, name=name)


class Box:
    """A toolset that gives what it is told to, and can end or fail at will."""

    def __init__(self, name: str, tools: object, *, fail_on_exit: bool = False) -> None:
        self.name = name
        self.given = tools
        self.fail_on_exit = fail_on_exit
        self.opened = 0
        self.end = anyio.Event()
        self.started = anyio.Event()
        self.hang = False
        self.seen: list[object] = []

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[Sequence[ollm.Tool]]:
        self.opened += 1
        self.seen.append(CURRENT.get())
        self.started.set()
        if self.hang:
            await anyio.sleep_forever()
        with anyio.CancelScope() as scope:

            async def end_when_told() -> None:
                await self.end.wait()
                scope.cancel()

            async with anyio.create_task_group() as group:
                group.start_soon(end_when_told)
                yield self.given  # type: ignore[misc]
                group.cancel_scope.cancel()
        if self.fail_on_exit:
            raise RuntimeError("could not stop")


CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("CURRENT", default="unset")


async def test_tools_that_clash_in_a_toolset_are_numbered_and_belong_to_it(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    box = Box("pack", [_tool("a.b"), _tool("a_b"), _tool("a_b")])
    sessions = ToolsetSessions()
    with caplog.at_level(logging.WARNING, logger="ollm.runtime.toolsets"):
        tools = await sessions.tools(box)
    assert list(tools) == ["pack_a_b", "pack_a_b_2", "pack_a_b_3"]
    assert {tool.pack for tool in tools.values()} == {"pack"}
    assert [tool.function() for tool in tools.values()] == ["a.b", "a_b", "a_b"]
    assert [r.getMessage() for r in caplog.records] == [
        "toolset 'pack' has two tools named 'pack_a_b': the second is 'pack_a_b_2'",
        "toolset 'pack' has two tools named 'pack_a_b': the second is 'pack_a_b_3'",
    ]
    await sessions.aclose()


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("a_tool", "Toolset 'odd' gave str for its tools, not a list of ollm.Tool."),
        (42, "Toolset 'odd' gave int for its tools, not a list of ollm.Tool."),
        (
            [print],
            "Toolset 'odd' gave builtin_function_or_method among its tools, not an ollm.Tool.",
        ),
    ],
)
async def test_a_toolset_that_gives_something_else_is_reported_to_its_author(
    anyio_backend: str, given: object, message: str
) -> None:
    sessions = ToolsetSessions()
    with pytest.raises(ollm.ToolsetError) as caught:
        await sessions.tools(Box("odd", given))
    assert caught.value.message == message + " Report this to the toolset's author."
    await sessions.aclose()


async def test_a_toolset_closed_before_it_started_says_so(anyio_backend: str) -> None:
    box = Box("slow", [_tool("x")])
    box.hang = True
    sessions = ToolsetSessions()
    failures: list[ollm.OllmError] = []

    async def ask() -> None:
        try:
            await sessions.tools(box)
        except ollm.OllmError as exc:
            failures.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        await box.started.wait()
        await sessions.aclose()
    [failure] = failures
    assert failure.message == "Toolset 'slow' was closed before it had started (the chat ended)."
    assert not sessions


async def test_a_toolset_that_ends_on_its_own_is_opened_again(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    box = Box("fleeting", [_tool("x")])
    sessions = ToolsetSessions()
    with caplog.at_level(logging.INFO, logger="ollm.runtime.toolsets"):
        await sessions.tools(box)
        box.end.set()
        with anyio.fail_after(10):
            while sessions:  # its task forgets it as it ends
                await anyio.sleep(0)
        box.end = anyio.Event()
        assert list(await sessions.tools(box)) == ["fleeting_x"]
    assert box.opened == 2
    assert "toolset 'fleeting' ended on its own; the next chat opens it again" in [
        r.getMessage() for r in caplog.records
    ]
    await sessions.aclose()


async def test_a_toolset_that_fails_to_stop_is_logged_and_closing_goes_on(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = ToolsetSessions()
    stubborn, fine = Box("stubborn", [_tool("x")], fail_on_exit=True), Box("fine", [_tool("y")])
    await sessions.tools(stubborn)
    await sessions.tools(fine)
    with caplog.at_level(logging.WARNING, logger="ollm.runtime.toolsets"):
        await sessions.aclose()
    assert [r.getMessage() for r in caplog.records] == [
        "toolset 'stubborn' failed while stopping: RuntimeError: could not stop"
    ]
    assert not sessions


async def test_a_toolset_sees_the_context_of_whoever_opened_it(anyio_backend: str) -> None:
    box = Box("ctx", [_tool("x")])
    sessions = ToolsetSessions()
    token = CURRENT.set("request-42")
    try:
        await sessions.tools(box)
    finally:
        CURRENT.reset(token)
    assert box.seen == ["request-42"]
    await sessions.aclose()


async def test_a_glob_that_matches_nothing_when_there_are_no_tools(anyio_backend: str) -> None:
    chat_client = ollm.ChatClient(ollm.Registries(), provider=Plain(), tools=["x_*"])
    events = await collect(chat_client.chat("hi"))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.message == "No tool matches 'x_*'. Available tools: none."


# -- tool calls ------------------------------------------------------------------------

PIXEL = ollm.ImagePart(b"\x89PNG\r\n\x1a\nfake", "image/png")


@ollm.tool(timeout=0.01)
async def stuck() -> str:
    """Never finish."""
    await anyio.sleep_forever()
    return ""


@ollm.tool(timeout=60)  # the chat's own limit is for `stuck` only
def echo_call(text: str, ctx: ollm.ToolContext) -> str:
    """Say which call this is."""
    return f"{ctx.call.id}:{ctx.call.name}:{text}:{ctx.abort.aborted}"


@ollm.tool(timeout=60)  # the chat's own limit is for `stuck` only
def refuse() -> str:
    """Fail with a code of its own."""
    raise ollm.ToolsetError("The notes server stopped.", code="NOTES_STOPPED")


@ollm.tool(timeout=60)  # the chat's own limit is for `stuck` only
def group() -> str:
    """Fail twice at once."""
    raise ExceptionGroup("several", [ValueError("first"), KeyError()])


@ollm.tool(timeout=60)  # the chat's own limit is for `stuck` only
def soft_failure() -> ollm.ToolResult:
    """Report an error without raising."""
    return ollm.ToolResult("No such page.", is_error=True)


@ollm.tool(timeout=60)  # the chat's own limit is for `stuck` only
def picture() -> ollm.ToolResult:
    """Show a picture."""
    return ollm.ToolResult(images=(PIXEL,))


@ollm.tool(timeout=60)  # the chat's own limit is for `stuck` only
def plain_text() -> str:
    """Say something."""
    return "words"


def _call(ident: str, name: str, **args: Any) -> ollm.ToolCall:
    return ollm.ToolCall(ident, name, args)


async def _results(
    *calls: ollm.ToolCall, capabilities: ollm.ModelCapabilities | None = None
) -> tuple[list[ollm.ToolCallResultEvent], ScriptedProvider, float]:
    provider = ScriptedProvider(Reply(tool_calls=list(calls)), "done", capabilities=capabilities)
    tools = [stuck, echo_call, refuse, group, soft_failure, picture, plain_text]
    chat_client = ollm.ChatClient(
        ollm.Registries(), provider=provider, tools=tools, tool_timeout=0.02
    )
    started = time.perf_counter()
    events = await collect(chat_client.chat("go"))
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    assert_one_finish_last(events, "stop")
    assert_history_valid(chat_client.conversation)
    return [e for e in events if isinstance(e, ollm.ToolCallResultEvent)], provider, elapsed_ms


async def test_every_kind_of_tool_outcome_says_whether_it_failed_and_why(
    anyio_backend: str,
) -> None:
    results, provider, elapsed_ms = await _results(
        _call("a", "missing"),
        _call("b", "echo_call", text=["not", "text"]),
        _call("c", "refuse"),
        _call("d", "group"),
        _call("e", "soft_failure"),
        _call("f", "stuck"),
        _call("g", "echo_call", text="hi"),
    )
    outcomes = [(r.call.id, r.is_error, r.error_code) for r in results]
    assert outcomes == [
        ("a", True, "TOOL_NOT_FOUND"),
        ("b", True, "INVALID_ARGUMENTS"),
        ("c", True, "NOTES_STOPPED"),
        ("d", True, "TOOL_FAILED"),
        ("e", True, "TOOL_FAILED"),
        ("f", True, "TOOL_TIMEOUT"),
        ("g", False, None),
    ]
    by_id = {r.call.id: r.result for r in results}
    assert by_id["c"] == "Tool 'refuse' failed: The notes server stopped."
    assert by_id["d"] == "Tool 'group' failed: ValueError: first; KeyError"
    assert by_id["e"] == "No such page."
    # The tool's own timeout wins over the chat's (0.02 s here).
    assert by_id["f"] == "Tool 'stuck' did not finish within 0.01 seconds."
    # A tool that asks for its context gets the model's call and the chat's signal.
    assert by_id["g"] == "g:echo_call:hi:False"
    # Every call that ran says how long it took, within the chat's own time.
    for result in results[1:]:
        assert 0.0 < result.duration_ms <= elapsed_ms
    assert results[0].duration_ms == 0.0  # an unknown tool never ran
    assert provider.requests[1].messages[-1].role == "tool"


async def test_images_for_a_model_that_cannot_see_them_become_notes(anyio_backend: str) -> None:
    blind = ollm.ModelCapabilities(vision=False)
    results, provider, _ = await _results(
        _call("a", "plain_text"), _call("b", "picture"), capabilities=blind
    )
    assert [r.result for r in results] == [
        "words",
        "[image/png image of 12 bytes, left out: mock-model cannot see images]",
    ]
    assert [r.images for r in results] == [(), ()]
    assert not any(m.images for m in provider.requests[1].messages)


async def test_images_reach_a_model_whose_provider_cannot_say(anyio_backend: str) -> None:
    class Unsure(ScriptedProvider):
        model_capabilities = None  # type: ignore[assignment]

    provider = Unsure(Reply(tool_calls=[_call("a", "picture")]), "done")
    chat_client = ollm.ChatClient(ollm.Registries(), provider=provider, tools=[picture])
    await collect(chat_client.chat("go"))
    assert [m.images for m in provider.requests[1].messages if m.role == "tool"] == [(PIXEL,)]


async def test_a_refusal_after_text_streamed_is_not_retried_with_react(
    anyio_backend: str,
) -> None:
    refusal = ollm.ErrorEvent("tiny does not support tools", "TOOLS_UNSUPPORTED")
    other = ollm.ErrorEvent("the server fell over", "PROVIDER_ERROR")
    for first in (Reply("Let me", error=refusal), Reply(error=other)):
        provider = ScriptedProvider(first, "never")
        registries = ollm.Registries()
        registries.providers.register(provider)
        registries.strategies.register(ollm.StrategySpec("react", ollm.NativeStrategy))
        chat_client = ollm.ChatClient(registries, model="tiny", tools=[plain_text])
        events = await collect(chat_client.chat("q"))
        assert not [e for e in events if isinstance(e, ollm.NoticeEvent)]
        assert len(provider.requests) == 1
        assert_one_finish_last(events, "error")


async def test_without_react_a_refusal_keeps_its_code_and_names_the_model(
    anyio_backend: str,
) -> None:
    refusal = ollm.ErrorEvent("tiny does not support tools", "TOOLS_UNSUPPORTED")
    provider = ScriptedProvider(Reply(error=refusal))
    registries = ollm.Registries()
    registries.providers.register(provider)
    events = await collect(ollm.ChatClient(registries, model="tiny", tools=[plain_text]).chat("q"))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "TOOLS_UNSUPPORTED"
    assert error.message == (
        "tiny does not support tools. tiny cannot call tools natively. To use tools with it, "
        "install ReAct support (pip install ollm-react), or chat without tools."
    )


async def test_run_takes_the_chat_arguments_and_returns_only_its_own_messages(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider("first", Reply(tool_calls=[_call("a", "plain_text")]), "second")
    async with ollm.ChatClient(ollm.Registries(), provider=provider) as chat_client:
        await chat_client.run("one")
        result = await chat_client.run("two", tools=[plain_text])
    assert [t.name for t in provider.requests[1].tools] == ["plain_text"]
    assert [(m.role, m.text) for m in result.messages] == [
        ("user", "two"),
        ("assistant", ""),
        ("tool", "words"),
        ("assistant", "second"),
    ]
    assert (result.text, result.finish_reason) == ("second", "stop")


async def test_closing_a_client_closes_the_providers_its_registries_built(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider("hi")
    registries = ollm.Registries()
    registries.providers.register(ollm.ProviderSpec("scripted", lambda: provider))
    async with ollm.ChatClient(registries) as chat_client:
        assert (await chat_client.run("x")).text == "hi"
    assert provider.closed
    given = ScriptedProvider("hi")
    async with ollm.ChatClient(provider=given) as chat_client:  # no registries of its own
        assert (await chat_client.run("x")).text == "hi"


class BareIterator:
    """A provider whose stream is a plain async iterator (a class, no ``aclose``).

    It has no ``default_model`` either: that attribute is optional.
    """

    def __init__(self, *events: ollm.ProviderEvent) -> None:
        self.name = "bare"
        self.events = list(events)

    def chat_stream(self, request: ollm.ProviderRequest) -> BareIterator:
        return self

    def __aiter__(self) -> BareIterator:
        return self

    async def __anext__(self) -> ollm.ProviderEvent:
        if not self.events:
            raise StopAsyncIteration
        return self.events.pop(0)


async def test_a_provider_stream_without_aclose_is_read_and_let_go_quietly(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    provider = BareIterator(ollm.TextEvent("Hi"), ollm.FinishEvent("stop"))
    result = await ollm.ChatClient(ollm.Registries(), provider=provider, model="m").run("hi")
    assert (result.text, result.finish_reason) == ("Hi", "stop")
    assert caplog.records == []  # nothing failed to close


async def test_a_reply_cancelled_after_thinking_alone_keeps_the_thinking_and_no_text(
    anyio_backend: str,
) -> None:
    """Cancelled from outside before any text: the history holds the thought, no text."""
    provider = ScriptedProvider(
        Reply(thinking=["Let me", " think"], text=["never"], delay=0.01), "next"
    )
    chat_client = ollm.ChatClient(ollm.Registries(), provider=provider)
    with anyio.CancelScope() as outside:
        async with chat_client.chat("hi") as stream:
            async for event in stream:
                if isinstance(event, ollm.ThinkingEvent) and event.text == " think":
                    outside.cancel()
                    await anyio.sleep(0)
    reply = chat_client.conversation.messages[-1]
    assert (reply.role, reply.thinking, reply.text, reply.incomplete) == (
        "assistant",
        "Let me think",
        "",
        True,
    )
    assert (await chat_client.run("again")).text == "next"
    assert_history_valid(chat_client.conversation)


async def test_a_provider_stream_that_ends_without_a_finish_is_a_stop(anyio_backend: str) -> None:
    """As docs/plugins.md says: no finish and no error is a finish with 'stop', no usage."""
    provider = BareIterator(ollm.TextEvent("Hi"))
    chat_client = ollm.ChatClient(ollm.Registries(), provider=provider, model="m")
    events = await collect(chat_client.chat("hi"))
    [turn] = [e for e in events if isinstance(e, ollm.TurnCompleteEvent)]
    assert (turn.reason, turn.usage) == ("stop", None)
    assert_one_finish_last(events, "stop")


async def test_the_stream_signal_says_why_the_chat_was_aborted(anyio_backend: str) -> None:
    for reason, expected in ((None, "aborted"), ("the user left", "the user left")):
        provider = ScriptedProvider(Reply("never", hang=True))
        stream = ollm.ChatClient(ollm.Registries(), provider=provider).chat("hi")
        if reason is None:
            stream.abort()
        else:
            stream.abort(reason)
        assert (stream.signal.aborted, stream.signal.reason) == (True, expected)
        assert_one_finish_last(await collect(stream), "cancelled")


async def test_a_provider_without_default_model_asks_for_a_model_in_words(
    anyio_backend: str,
) -> None:
    """``default_model`` is optional: without it and without model=, the usual words."""
    provider = BareIterator(ollm.TextEvent("never"))
    events = await collect(ollm.ChatClient(ollm.Registries(), provider=provider).chat("hi"))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "INVALID_REQUEST"
    assert error.message.startswith("No model chosen.")
    assert_one_finish_last(events, "error")


class Attentive:
    """A provider that watches the abort itself and reports the cut reply's usage."""

    default_model = "attentive-model"
    handles_abort = True

    def __init__(self) -> None:
        self.name = "attentive"
        self.waiting = anyio.Event()

    async def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[Any]:
        yield ollm.TextEvent("Hello")
        assert request.abort is not None
        self.waiting.set()
        await request.abort.wait()
        yield ollm.FinishEvent("cancelled", ollm.Usage(7, 2, 9))


async def test_a_provider_that_handles_the_abort_ends_the_reply_itself(anyio_backend: str) -> None:
    """Its own last event (with the usage of what it did) is not cut off by a guard."""
    provider = Attentive()
    stream = ollm.ChatClient(ollm.Registries(), provider=provider).chat("hi")
    async with anyio.create_task_group() as group:

        async def abort_while_it_waits() -> None:
            await provider.waiting.wait()
            stream.abort()

        group.start_soon(abort_while_it_waits)
        events = await collect(stream)
    assert_one_finish_last(events, "cancelled")
    assert events[-1] == ollm.FinishEvent("cancelled", ollm.Usage(7, 2, 9))


class Tidy:
    """Watches the abort itself; its cleanup awaits and is not shielded (it trusts ollm)."""

    default_model = "tidy-model"
    handles_abort = True

    def __init__(self) -> None:
        self.name = "tidy"
        self.log: list[str] = []

    async def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[Any]:
        try:
            yield ollm.TextEvent("Hello")
            await anyio.sleep_forever()
        finally:
            await anyio.sleep(0)  # returning a connection to its pool, say
            self.log.append("cleaned up")


async def test_a_provider_stream_is_closed_to_its_end_when_the_chat_is_cancelled_from_outside(
    anyio_backend: str,
) -> None:
    """Cancelled while the provider waits at a yield: its cleanup runs whole (shielded)."""
    provider = Tidy()
    chat_client = ollm.ChatClient(ollm.Registries(), provider=provider)
    with anyio.CancelScope() as outside:
        async with chat_client.chat("hi") as stream:
            async for event in stream:
                if isinstance(event, ollm.TextEvent):
                    outside.cancel()
                    await anyio.sleep(0)
    assert provider.log == ["cleaned up"]
    reply = chat_client.conversation.messages[-1]
    assert (reply.text, reply.incomplete) == ("Hello", True)
