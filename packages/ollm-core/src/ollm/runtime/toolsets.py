"""Open toolsets for chats, each in a task of its own, and pick a chat's tools among them.

A toolset's context (an MCP client with its subprocess and task groups) must be entered
and left by one task. A chat is an async generator that the caller may drive from any
task, and that yields between its start and its end, so no toolset may live in its
frame. Each open toolset is therefore held by a background task of the event loop: the
chat (or the client) asks for it to be opened, waits until its tools are listed, and
later asks it to stop and waits, bounded, until it has. The background task outlives
no event loop: if nobody closes the toolset, the loop cancels the task when it ends,
which leaves the context all the same.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

import anyio

from ollm.errors import OllmError, ToolNotFoundError, ToolsetError
from ollm.registries.tools import ToolRegistry, unknown_tool_message
from ollm.runtime.tool_runner import describe_exception
from ollm.tools.tool import Tool
from ollm.tools.toolset import (
    TOOLSET_SEPARATOR,
    Toolset,
    check_toolset_name,
    toolset_tool_name,
    valid_tool_name,
)

__all__ = ["ToolsetSessions", "name_toolset_tools", "select_tools"]

log = logging.getLogger(__name__)

CLOSE_GRACE = 30.0
"""Seconds a toolset may take to stop (an MCP server gets about 6) before it is cancelled."""
CANCEL_GRACE = 5.0
_GLOB = "*?["
# Background tasks are referenced here while they run: asyncio keeps only weak ones.
_running: set[Any] = set()


class _Session:
    """One open toolset: its tools, and the events that start and stop its task."""

    __slots__ = ("_forget", "done", "error", "ready", "scope", "stop", "tools", "toolset")

    def __init__(self, toolset: Toolset, forget: Callable[[_Session], None]) -> None:
        self.toolset = toolset
        self.tools: dict[str, Tool] = {}
        self.error: OllmError | None = None
        self.ready = anyio.Event()  # opened, or failed to
        self.stop = anyio.Event()
        self.done = anyio.Event()
        self.scope = anyio.CancelScope()
        self._forget = forget

    async def hold(self) -> None:
        """The background task: enter the toolset's context, wait for ``stop``, leave it."""
        name = self.toolset.name
        try:
            with self.scope:
                async with self.toolset.open() as tools:
                    self.tools = _prefixed(name, tools)
                    self.ready.set()
                    try:
                        await self.stop.wait()
                    finally:
                        # Ended by the toolset itself (its server died): while it winds
                        # down, the next chat must already get a fresh one.
                        self._forget(self)
            if not self.ready.is_set():
                self.error = ToolsetError(
                    f"Toolset {name!r} was closed before it had started (the chat ended)."
                )
            elif not self.stop.is_set():
                log.info("toolset %r ended on its own; the next chat opens it again", name)
        except (Exception, SystemExit) as exc:  # a trio system task must not raise
            if self.ready.is_set():
                log.warning("toolset %r failed while stopping: %s", name, describe_exception(exc))
            else:
                self.error = _open_error(name, exc)
                log.debug("toolset %r failed to open", name, exc_info=True)
        finally:
            self.ready.set()
            self.done.set()
            self._forget(self)

    async def close(self) -> None:
        """Ask the task to leave the context; wait for it, bounded, even when cancelled."""
        self.stop.set()
        if not self.ready.is_set():
            self.scope.cancel()  # still starting: nothing to stop gracefully
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(CLOSE_GRACE):
                await self.done.wait()
            if self.done.is_set():
                return
            self.scope.cancel()
            with anyio.move_on_after(CANCEL_GRACE):
                await self.done.wait()
            if not self.done.is_set():
                log.warning(
                    "toolset %r did not stop within %g seconds; it was left behind",
                    self.toolset.name,
                    CLOSE_GRACE + CANCEL_GRACE,
                )


class ToolsetSessions:
    """The toolsets one owner (a ``ChatClient``, or one chat) has opened.

    ``tools(toolset)`` opens a toolset on first use and gives its tools under their
    prefixed names; ``aclose()`` stops every open one. A toolset whose task ended (it
    failed, or the event loop stopped) is opened afresh the next time it is asked for.
    """

    def __init__(self) -> None:
        self._sessions: dict[int, _Session] = {}

    def __bool__(self) -> bool:
        return bool(self._sessions)

    async def tools(self, toolset: Toolset) -> dict[str, Tool]:
        """The tools of ``toolset``, opening it first if needed (raises ``OllmError``)."""
        session = self._sessions.get(id(toolset))
        if session is None:
            session = _Session(toolset, self._forget)
            self._sessions[id(toolset)] = session
            _spawn(session.hold, f"ollm toolset {toolset.name}")
        await session.ready.wait()
        if session.error is not None:
            raise session.error
        return session.tools

    async def aclose(self) -> None:
        """Stop every open toolset (each gets ``CLOSE_GRACE`` seconds); never raises."""
        sessions = list(self._sessions.values())
        for session in sessions:
            session.stop.set()
        for session in sessions:
            await session.close()

    def _forget(self, session: _Session) -> None:
        if self._sessions.get(id(session.toolset)) is session:
            del self._sessions[id(session.toolset)]


async def select_tools(
    items: Iterable[str | Tool | Toolset],
    registry: ToolRegistry,
    toolsets: Sequence[Toolset],
    open_toolset: Callable[[Toolset], Awaitable[dict[str, Tool]]],
    notices: list[str] | None = None,
) -> dict[str, Tool]:
    """Resolve a chat's tools.

    A ``Tool`` is taken as it is; a toolset gives all its tools; a string is a
    registered tool's name, or a name or glob (``git_*``, ``*``) over the registered
    tools and those of ``toolsets``. Only the toolsets whose prefix a pattern can
    match are opened (in parallel). A pattern that matches nothing raises
    ``ToolNotFoundError`` with the names there are. A toolset's tool whose name is
    taken is renamed (see ``name_toolset_tools``); each renaming is said in
    ``notices`` (else logged as a warning).
    """
    chosen: dict[str, Tool] = {}
    patterns: list[str] = []
    wanted: list[Toolset] = []
    taken = {tool.name: tool for tool in registry.tools()}
    for item in items:
        if isinstance(item, str):
            if item in registry:
                _add(chosen, registry.get(item))
            else:
                patterns.append(item)
        elif isinstance(item, Tool):
            _add(chosen, item)
            taken.setdefault(item.name, item)
        else:
            wanted.append(item)
    needed = [t for t in toolsets if any(_may_match(p, t.name) for p in patterns)]
    opened = await _open_all([*wanted, *(t for t in needed if t not in wanted)], open_toolset)
    # Named in one order whatever was opened: the client's toolsets as configured, then
    # those given to this chat alone (as `ollm tools` lists them).
    order = [t for t in toolsets if id(t) in opened]
    order += [t for t in wanted if not any(t is known for known in order)]
    named, said = name_toolset_tools(taken, [(t, opened[id(t)]) for t in order])
    for message in said:
        if notices is None:
            log.warning("%s", message)
        else:
            notices.append(message)
    for toolset in wanted:
        for tool in named[id(toolset)].values():
            _add(chosen, tool)
    if patterns:
        pool = {tool.name: tool for tool in registry.tools()}
        for toolset in needed:
            pool.update(named[id(toolset)])
        for pattern in patterns:
            matched = [tool for name, tool in pool.items() if fnmatch.fnmatchcase(name, pattern)]
            if not matched:
                raise ToolNotFoundError(_no_match(pattern, list(pool)))
            for tool in matched:
                _add(chosen, tool)
    return chosen


def name_toolset_tools(
    taken: Mapping[str, Tool], listing: Sequence[tuple[Toolset, Mapping[str, Tool]]]
) -> tuple[dict[int, dict[str, Tool]], list[str]]:
    """The tools of each toolset (in ``listing``'s order) under names no other tool has.

    An installed tool (``taken``: a tool pack's, or one the application gave) keeps its
    name, and so does the first toolset's tool of a name; a later one with a name
    already given is offered as ``NAME_2`` (``NAME_3``...), never silently hidden. Gives
    each toolset's tools by the toolset's ``id``, and one message per renaming.
    """
    owners: dict[str, str] = {
        name: f"the tool {name!r} of {tool.pack or 'the application'}"
        for name, tool in taken.items()
    }
    named: dict[int, dict[str, Tool]] = {}
    said: list[str] = []
    for toolset, tools in listing:
        mine: dict[str, Tool] = {}
        for name, tool in tools.items():
            unique, number = name, 2
            while unique in owners:
                unique = valid_tool_name(f"{name}_{number}")
                number += 1
            if unique != name:
                said.append(
                    f"toolset {toolset.name!r} has a tool named {name!r}, as {owners[name]} "
                    f"is: that one keeps the name, this one is offered as {unique!r}"
                )
                tool = tool.renamed(unique)
            owners[unique] = f"the tool {unique!r} of toolset {toolset.name!r}"
            mine[unique] = tool
        named[id(toolset)] = mine
    return named, said


async def _open_all(
    toolsets: Sequence[Toolset], open_toolset: Callable[[Toolset], Awaitable[dict[str, Tool]]]
) -> dict[int, dict[str, Tool]]:
    """Open several toolsets at once; the first failure (in their order) is raised."""
    opened: dict[int, dict[str, Tool]] = {}
    errors: dict[int, OllmError] = {}

    async def open_one(toolset: Toolset) -> None:
        try:
            opened[id(toolset)] = await open_toolset(toolset)
        except OllmError as exc:
            errors[id(toolset)] = exc

    if len(toolsets) == 1:
        await open_one(toolsets[0])
    elif toolsets:
        async with anyio.create_task_group() as group:
            for toolset in toolsets:
                group.start_soon(open_one, toolset)
    for toolset in toolsets:
        if id(toolset) in errors:
            raise errors[id(toolset)]
    return opened


def _may_match(pattern: str, toolset: str) -> bool:
    """Whether ``pattern`` can match a name that starts with the toolset's prefix.

    Both the names the pattern matches and the toolset's names start with a fixed text
    (the pattern's up to its first wildcard, and ``toolset_``), so one of the two texts
    must start with the other.
    """
    cut = min((i for i in (pattern.find(c) for c in _GLOB) if i >= 0), default=len(pattern))
    literal, prefix = pattern[:cut], toolset + TOOLSET_SEPARATOR
    return literal.startswith(prefix) or prefix.startswith(literal)


def _add(chosen: dict[str, Tool], tool: Tool) -> None:
    present = chosen.get(tool.name)
    if present is None:
        chosen[tool.name] = tool
    elif present is not tool:
        log.warning(
            "two tools are named %r (from %s and %s): the first is offered",
            tool.name,
            present.pack or "the application",
            tool.pack or "the application",
        )


def _no_match(pattern: str, available: list[str]) -> str:
    if not any(c in pattern for c in _GLOB):
        return unknown_tool_message(pattern, available)
    listed = ", ".join(available) if available else "none"
    return f"No tool matches {pattern!r}. Available tools: {listed}."


def _prefixed(name: str, tools: object) -> dict[str, Tool]:
    """The toolset's tools under ``name_tool``, each name unique."""
    check_toolset_name(name)
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        raise ToolsetError(
            f"Toolset {name!r} gave {type(tools).__name__} for its tools, not a list of "
            "ollm.Tool. Report this to the toolset's author."
        )
    named: dict[str, Tool] = {}
    for tool in tools:
        if not isinstance(tool, Tool):
            raise ToolsetError(
                f"Toolset {name!r} gave {type(tool).__name__} among its tools, not an "
                "ollm.Tool. Report this to the toolset's author."
            )
        full = unique = toolset_tool_name(name, tool.name)
        number = 2
        while unique in named:
            unique = toolset_tool_name(name, f"{tool.name}_{number}")
            number += 1
        if unique != full:
            log.warning("toolset %r has two tools named %r: the second is %r", name, full, unique)
        named[unique] = tool.renamed(unique, pack=name)
    return named


def _open_error(name: str, exc: BaseException) -> OllmError:
    own = _own_error(exc)
    if own is not None:
        return own
    return ToolsetError(
        f"Toolset {name!r} failed to start: {describe_exception(exc)}. Check its configuration; "
        "`ollm tools` shows what each toolset offers."
    )


def _own_error(exc: BaseException) -> OllmError | None:
    """The toolset's own error, also from inside the exception groups of its task groups."""
    if isinstance(exc, OllmError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _own_error(inner)
            if found is not None:
                return found
    return None


def _spawn(function: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
    """Start ``function`` in a task of the running event loop that no task group owns."""
    import asyncio
    import contextvars

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        # anyio runs on asyncio or trio: not asyncio, so trio.
        import trio

        trio.lowlevel.spawn_system_task(function, name=name, context=contextvars.copy_context())
        return
    task = loop.create_task(function(), name=name)
    _running.add(task)
    task.add_done_callback(_running.discard)
