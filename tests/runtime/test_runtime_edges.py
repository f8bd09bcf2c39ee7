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
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, collect

import ollm
from ollm.runtime.toolsets import ToolsetSessions

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
    return ollm.ChatClient(ollm.Registries(), provider=provider)  # type: ignore[arg-type]


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
    chat_client = ollm.ChatClient(ollm.Registries(), provider=Plain(), tools=["x_*"])  # type: ignore[arg-type]
    events = await collect(chat_client.chat("hi"))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.message == "No tool matches 'x_*'. Available tools: none."
