"""Toolsets in the runtime: opened once for the chats that need them, closed on every path."""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from runtime_helpers import assert_history_valid, assert_one_finish_last, client, collect

import ollm
from ollm.runtime.toolsets import select_tools
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


class Notes:
    """A toolset that records its life; its context holds a task group open, as MCP's does."""

    def __init__(
        self,
        name: str = "notes",
        *,
        tools: Sequence[ollm.Tool] | None = None,
        fail: BaseException | None = None,
        hang: bool = False,
    ) -> None:
        self.name = name
        self.log: list[str] = []
        self.fail = fail
        self.hang = hang
        self.calls: list[dict[str, Any]] = []
        self.started = anyio.Event()

        async def search(query: str) -> str:
            """Search the notes."""
            self.calls.append({"query": query})
            return f"found {query}"

        self._tools = list(tools) if tools is not None else [ollm.Tool.from_function(search)]

    @property
    def is_open(self) -> bool:
        return self.log.count("open") > self.log.count("closed")

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[Sequence[ollm.Tool]]:
        self.log.append("open")
        self.started.set()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(anyio.sleep_forever)
                if self.fail is not None:
                    raise self.fail
                if self.hang:
                    await anyio.sleep_forever()
                yield self._tools
                group.cancel_scope.cancel()
        finally:
            self.log.append("closed")


def calling(*calls: tuple[str, dict[str, Any]]) -> Reply:
    return Reply(tool_calls=list(calls))


def offered(provider: ScriptedProvider, index: int = 0) -> list[str]:
    return [tool.name for tool in provider.requests[index].tools]


async def test_a_toolset_in_tools_offers_its_tools_prefixed_and_stays_open_for_the_client(
    anyio_backend: str,
) -> None:
    notes = Notes()
    provider = ScriptedProvider(
        calling(("notes_search", {"query": "paris"})), "Found it.", "Again."
    )
    chat_client = client(provider, tools=[notes])
    events = await collect(chat_client.chat("Find paris"))
    assert_one_finish_last(events, "stop")
    assert offered(provider) == ["notes_search"]
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert (result.result, result.is_error) == ("found paris", False)
    assert notes.calls == [{"query": "paris"}]
    await collect(chat_client.chat("And again"))
    assert notes.log == ["open"]  # one opening for both chats
    await chat_client.aclose()
    assert notes.log == ["open", "closed"]
    assert_history_valid(chat_client.conversation)


async def test_globs_pick_among_the_clients_toolsets_and_open_only_those_they_can_match(
    anyio_backend: str,
) -> None:
    notes, other = Notes("notes"), Notes("other")
    provider = ScriptedProvider("ok")
    async with client(provider, toolsets=[notes, other], tools=["notes_*"]) as chat_client:
        await collect(chat_client.chat("hi"))
        assert offered(provider) == ["notes_search"]
        assert other.log == []
    assert notes.log == ["open", "closed"]


async def test_a_pattern_that_matches_nothing_names_what_there_is(anyio_backend: str) -> None:
    async def read(page: str) -> str:
        """Read a page."""
        return page

    notes = Notes(tools=[ollm.Tool.from_function(read), ollm.Tool.from_function(_noop)])
    provider = ScriptedProvider("never")
    async with client(provider, toolsets=[notes], tools=["note_*", "notes_serch"]) as chat_client:
        events = await collect(chat_client.chat("hi"))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "TOOL_NOT_FOUND"
    assert error.message == "No tool matches 'note_*'. Available tools: notes_read, notes__noop."
    notes = Notes()
    assert not provider.requests
    events = await collect(client(provider, toolsets=[notes], tools=["notes_serch"]).chat("x"))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert "Did you mean 'notes_search'?" in error.message


async def test_a_toolset_given_to_one_chat_is_closed_when_that_chat_ends(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider("one", Reply.connection_error(), Reply.hanging(["x"]), "four")
    chat_client = client(provider)

    ended = Notes()
    await collect(chat_client.chat("normal end", tools=[ended]))
    assert ended.log == ["open", "closed"]

    failed = Notes()
    events = await collect(chat_client.chat("provider error", tools=[failed]))
    assert_one_finish_last(events, "error")
    assert failed.log == ["open", "closed"]

    aborted = Notes()
    stream = chat_client.chat("abort", tools=[aborted])
    async for event in stream:
        if isinstance(event, ollm.TextEvent):
            stream.abort()
    assert aborted.log == ["open", "closed"]

    left = Notes()
    async with chat_client.chat("break", tools=[left]) as stream:
        async for _ in stream:
            break
    assert left.log == ["open", "closed"]
    assert_history_valid(chat_client.conversation)


async def test_closing_the_client_in_a_cancelled_scope_still_waits_for_its_toolsets(
    anyio_backend: str,
) -> None:
    notes = Notes()
    chat_client = client(ScriptedProvider("ok"), toolsets=[notes], tools=["notes_*"])
    await collect(chat_client.chat("hi"))
    assert notes.is_open
    with anyio.CancelScope() as scope:
        scope.cancel()
        await chat_client.aclose()
    # Stopped before aclose() returned, not left to stop some time later.
    assert notes.log == ["open", "closed"]


async def test_a_toolset_that_fails_to_open_ends_the_chat_with_its_error(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider("never")
    failing = Notes(fail=ollm.ToolsetError("Server 'notes' did not start.", code="NOTES_DOWN"))
    events = await collect(client(provider, tools=[failing]).chat("hi"))
    assert_one_finish_last(events, "error")
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert (error.code, error.message) == ("NOTES_DOWN", "Server 'notes' did not start.")

    crashing = Notes("crash", fail=RuntimeError("no database"))
    chat_client = client(provider, tools=[crashing])
    events = await collect(chat_client.chat("hi"))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "TOOLSET_FAILED"
    assert error.message == (
        "Toolset 'crash' failed to start: RuntimeError: no database. Check its configuration; "
        "`ollm tools` shows what each toolset offers."
    )
    assert crashing.log == ["open", "closed"]
    assert not provider.requests
    assert [m.text for m in chat_client.conversation.messages] == ["hi"]
    # The next chat tries again rather than keeping a failure for ever.
    await collect(chat_client.chat("again"))
    assert crashing.log == ["open", "closed", "open", "closed"]


async def test_aborting_while_a_toolset_starts_cancels_its_start(anyio_backend: str) -> None:
    hanging = Notes(hang=True)
    provider = ScriptedProvider("never")
    stream = client(provider).chat("hi", tools=[hanging])

    async def abort_when_started() -> None:
        await hanging.started.wait()
        stream.abort()

    async with anyio.create_task_group() as group:
        group.start_soon(abort_when_started)
        events = await collect(stream)
    assert_one_finish_last(events, "cancelled")
    assert hanging.log == ["open", "closed"]


async def test_toolset_tools_are_validated_and_their_results_carry_images(
    anyio_backend: str,
) -> None:
    pixel = ollm.ImagePart(b"\x89PNG\r\n\x1a\nfake", "image/png")
    received: list[dict[str, Any]] = []

    async def shoot(**args: Any) -> ollm.ToolResult:
        received.append(args)
        return ollm.ToolResult("a screenshot", images=(pixel,))

    def positive_width(args: dict[str, Any]) -> str | None:
        width = args.get("width")
        return (
            None if isinstance(width, int) and width > 0 else f"{width!r} is not > 0 - at $.width"
        )

    schema = ollm.ToolSchema(
        "shoot",
        "Take a screenshot.",
        {
            "type": "object",
            "properties": {"width": {"type": "integer", "title": "Width"}},
            "required": ["width"],
        },
    )
    screen = Notes("screen", tools=[ollm.Tool.from_schema(schema, shoot, validator=positive_width)])
    provider = ScriptedProvider(
        calling(("screen_shoot", {"width": -3}), ("screen_shoot", {"width": 10})),
        "I see it.",
        calling(("screen_shoot", {"width": 10})),
        "Cannot see.",
        capabilities=ollm.ModelCapabilities(vision=True),
    )
    async with client(provider, tools=[screen]) as chat_client:
        events = await collect(chat_client.chat("look"))
        assert provider.requests[0].tools[0].parameters["properties"] == {
            "width": {"type": "integer"}
        }
        bad, good = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
        assert bad.error_code == "INVALID_ARGUMENTS"
        assert bad.result.startswith(
            "Invalid arguments for tool 'screen_shoot': -3 is not > 0 - at $.width."
        )
        assert received == [{"width": 10}]
        assert good.images == (pixel,)
        tool_message = provider.requests[1].messages[-1]
        assert tool_message.parts == (ollm.TextPart("a screenshot"), pixel)

        # A client asks once: another one, on the same conversation, asks again.
        provider.capabilities = ollm.ModelCapabilities(vision=False)
        async with client(
            provider, tools=[screen], conversation=chat_client.conversation
        ) as blind_client:
            await collect(blind_client.chat("and now"))
        blind = provider.requests[3].messages[-1]
        assert blind.images == ()
        assert blind.text == (
            "a screenshot\n[image/png image of 12 bytes, left out: mock-model cannot see images]"
        )


async def test_a_toolsets_error_keeps_its_code_and_a_reported_error_reaches_the_model(
    anyio_backend: str,
) -> None:
    async def stopped() -> str:
        """Fails as a dead server would."""
        raise ollm.ToolsetError("MCP server 'x' has stopped.", code="MCP_SERVER_STOPPED")

    async def refuses() -> ollm.ToolResult:
        """Reports an error."""
        return ollm.ToolResult("permission denied", is_error=True)

    pack = Notes("x", tools=[ollm.Tool.from_function(stopped), ollm.Tool.from_function(refuses)])
    provider = ScriptedProvider(calling(("x_stopped", {}), ("x_refuses", {})), "Sorry.")
    async with client(provider, tools=[pack]) as chat_client:
        events = await collect(chat_client.chat("go"))
    first, second = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert (first.error_code, first.result) == (
        "MCP_SERVER_STOPPED",
        "Tool 'x_stopped' failed: MCP server 'x' has stopped.",
    )
    assert (second.is_error, second.error_code, second.result) == (
        True,
        "TOOL_FAILED",
        "permission denied",
    )
    assert_one_finish_last(events, "stop")


async def test_two_tools_of_one_toolset_that_clash_once_made_valid_both_stay(
    anyio_backend: str,
) -> None:
    def one() -> str:
        """One."""
        return "1"

    def two() -> str:
        """Two."""
        return "2"

    pack = Notes(
        "pack",
        tools=[ollm.Tool.from_function(one, name="a.b"), ollm.Tool.from_function(two, name="a_b")],
    )
    provider = ScriptedProvider("ok")
    async with client(provider, tools=[pack]) as chat_client:
        await collect(chat_client.chat("hi"))
    assert offered(provider) == ["pack_a_b", "pack_a_b_2"]


def test_toolset_names_are_unique_and_valid() -> None:
    with pytest.raises(ValueError, match="two toolsets are named 'notes'"):
        ollm.ChatClient(ollm.Registries(), tools=[Notes()], toolsets=[Notes()])
    with pytest.raises(ollm.InvalidToolError, match="not a valid toolset name"):
        ollm.ChatClient(ollm.Registries(), tools=[Notes("git.hub")])


@given(
    prefix=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}", fullmatch=True),
    name=st.text(min_size=1, max_size=130),
)
def test_a_toolset_tool_name_is_valid_for_every_provider(prefix: str, name: str) -> None:
    made = ollm.toolset_tool_name(prefix, name)
    assert 1 <= len(made) <= 64
    assert all(c.isascii() and (c.isalnum() or c in "_-") for c in made)
    assert made.startswith(prefix + ollm.TOOLSET_SEPARATOR) or len(prefix) + 1 > 55


_NAME = st.from_regex(r"[a-z][a-z_]{0,5}", fullmatch=True)


@st.composite
def _patterns(draw: st.DrawFn, names: list[str]) -> str:
    """A glob cut from one of the names (so it often shares a toolset's prefix), or any."""
    if draw(st.booleans()):
        return draw(st.from_regex(r"[a-z_*?]{0,8}", fullmatch=True))
    name = draw(st.sampled_from(names))
    cut = draw(st.integers(0, len(name)))
    tail = draw(st.sampled_from(["", "*", "?", "*_*", "[a-m]*"]))
    return name[:cut] + tail


@given(
    toolsets=st.lists(_NAME, min_size=1, max_size=3, unique=True),
    tools=st.lists(_NAME, min_size=1, max_size=3, unique=True),
    data=st.data(),
)
def test_selection_opens_every_toolset_a_pattern_can_match(
    toolsets: list[str], tools: list[str], data: st.DataObject
) -> None:
    """The shortcut that skips toolsets never skips one with a matching tool."""
    packs = [
        Notes(name, tools=[ollm.Tool.from_function(_noop, name=tool) for tool in tools])
        for name in toolsets
    ]
    everything = [f"{pack.name}_{tool}" for pack in packs for tool in tools]
    pattern = data.draw(_patterns(everything))
    expected = sorted({n for n in everything if fnmatch.fnmatchcase(n, pattern)})

    async def run() -> list[str]:
        async def open_toolset(toolset: ollm.Toolset) -> dict[str, ollm.Tool]:
            return {
                f"{toolset.name}_{t.name}": t.renamed(f"{toolset.name}_{t.name}")
                for t in toolset._tools  # type: ignore[attr-defined]
            }

        try:
            chosen = await select_tools([pattern], ollm.ToolRegistry(), packs, open_toolset)
        except ollm.ToolNotFoundError:
            return []
        return sorted(chosen)

    assert anyio.run(run) == expected


def _noop() -> None:
    """Nothing."""
