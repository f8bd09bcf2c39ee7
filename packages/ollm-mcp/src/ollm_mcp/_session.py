"""One session with an MCP server: start or connect, list the tools, call them, stop.

The ``mcp`` SDK does the protocol and the transports (its stdio client closes the
server's input, then terminates and kills its process group, every wait bounded, even
when cancelled); this module gives each failure a code and a message naming the server.
What the SDK cannot read is screened on its way in (``_unreadable``).
"""

from __future__ import annotations

import logging
import math
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import IO, Any, TextIO, cast

import anyio
import mcp
import mcp_types
from mcp.shared.exceptions import MCPError

from ollm import Tool, ToolResult
from ollm.errors import OllmError
from ollm_mcp._errors import MCPErrorCode, mcp_error, stderr_tail
from ollm_mcp._server import MCPServer
from ollm_mcp._tools import needs_task_call, result_for_model, tool_from_mcp
from ollm_mcp._unreadable import (
    PARSING_FAILED,
    in_session,
    screened,
    stray_line,
    unreadable_reason,
)
from ollm_mcp._version import __version__

__all__ = ["open_session"]

log = logging.getLogger(__name__)

_WIND_DOWN = 5.0
MAX_TOOL_PAGES = 50
"""Pages of ``tools/list`` read at most: a server that pages for ever cannot hang a start."""


@asynccontextmanager
async def open_session(server: MCPServer) -> AsyncIterator[list[Tool]]:
    """Enter a session with ``server``; yield its tools; leave it (the server stops)."""
    with _stderr_file(server) as stderr:
        session = _Session(server, stderr)
        started = False
        with anyio.CancelScope(deadline=anyio.current_time() + server.startup_timeout) as scope:
            session.scope = scope
            try:
                async with AsyncExitStack() as stack:
                    client = await stack.enter_async_context(_client(session, stack))
                    session.client = client
                    tools = await session.list_tools()
                    started = True
                    session.started()
                    scope.deadline = math.inf  # the start is over: no deadline for the session
                    try:
                        yield tools
                    finally:
                        session.left.set()
            except OllmError:
                raise
            except Exception as exc:
                if started:
                    raise
                raise session.start_error(exc) from None
        if scope.cancelled_caught and not started:
            raise mcp_error(
                f"MCP server {server.name!r} did not answer within {server.startup_timeout:g} "
                f"seconds ({server.describe()}).{session.start_words()} Check that it speaks "
                "MCP, or give it more time with startup_timeout_sec.",
                MCPErrorCode.SERVER_TIMEOUT,
            )


class _Session:
    """What a session's tools need: the client, the server, its standard error."""

    def __init__(self, server: MCPServer, stderr: IO[str] | None) -> None:
        self.server = server
        self.stderr = stderr
        self.client: mcp.Client | None = None
        self.scope: anyio.CancelScope | None = None
        self.left = anyio.Event()  # the session has begun to wind down
        self.http_status: int | None = None  # the last HTTP error status, if any
        self.stray: str | None = None  # the first message that was not MCP, quoted
        self._said_stray = False
        self._running = False

    def on_stray(self, text: str) -> None:
        """The server sent something that is not MCP: quote the first, in one line."""
        if self.stray is None:
            self.stray = stray_line(text)
            if self._running:
                self._say_stray()

    def started(self) -> None:
        """The tools are listed: what went wrong on the way can be said now."""
        self._running = True
        if self.stray is not None:
            self._say_stray()

    def _say_stray(self) -> None:
        if self._said_stray:
            return
        self._said_stray = True
        step = (
            "; a server should write only MCP there, and its own messages to stderr"
            if self.server.command
            else ""
        )
        log.warning("MCP server %r %s. It was ignored%s.", self.server.name, self._stray(), step)

    def _stray(self) -> str:
        if self.server.command:
            return f"wrote a line that is not MCP to its standard output: {self.stray}"
        return f"sent a message that is not MCP: {self.stray}"

    async def list_tools(self) -> list[Tool]:
        assert self.client is not None
        tools: list[Tool] = []
        task_only: list[str] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            page = await self.client.list_tools(cursor=cursor)
            for listed in page.tools:
                if needs_task_call(listed):
                    task_only.append(listed.name)
                    continue
                made = tool_from_mcp(
                    self.server.name,
                    listed,
                    self.call,
                    self.server.tool_timeout,
                    trusted=self.server.trust,
                )
                if made is not None:
                    tools.append(made)
            cursor = page.next_cursor
            if cursor is None:
                break
        else:
            log.warning(
                "MCP server %r lists tools over more than %d pages; the rest are left out",
                self.server.name,
                MAX_TOOL_PAGES,
            )
        if task_only:
            log.warning(
                "MCP server %r: tools that run only as MCP tasks are left out (ollm does not "
                "start tasks): %s",
                self.server.name,
                ", ".join(map(repr, task_only)),
            )
        return tools

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Call a tool; a cancelled call sends MCP's notifications/cancelled (the SDK does)."""
        assert self.client is not None
        try:
            with in_session():
                result = await self.client.call_tool(name, arguments)
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise await self.stopped() from None
            if _unreadable(exc):
                raise mcp_error(
                    f"MCP server {self.server.name!r} answered the call, but its answer "
                    f"{unreadable_reason(exc.message)}, so the result is lost. " + _UNREADABLE_STEP,
                    MCPErrorCode.SERVER_ERROR,
                ) from None
            raise mcp_error(
                f"MCP server {self.server.name!r} answered the call with error {exc.code}: "
                f"{exc.message}",
                MCPErrorCode.SERVER_ERROR,
            ) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise await self.stopped() from None
        except Exception as exc:
            raise mcp_error(
                f"MCP server {self.server.name!r} sent an answer that is not valid MCP: "
                f"{_describe(exc)}",
                MCPErrorCode.SERVER_ERROR,
            ) from None
        return result_for_model(result)

    def last_words(self) -> str:
        tail = stderr_tail(self.stderr)
        return f" Its last words on stderr: {tail}." if tail else ""

    def start_words(self) -> str:
        """Its last words, and the first thing it sent that is not MCP (said only here)."""
        if self.stray is None or self._said_stray:
            return self.last_words()
        self._said_stray = True
        return f" It {self._stray()}.{self.last_words()}"

    async def stopped(self) -> OllmError:
        """The server is gone: end the session (the next chat starts it again); the error."""
        if self.scope is not None:
            # Leaves the context this toolset was opened with, from whichever task calls,
            # and waits until it has begun to (the runtime then forgets it at once).
            self.scope.cancel()
            with anyio.move_on_after(_WIND_DOWN):
                await self.left.wait()
        return mcp_error(
            f"MCP server {self.server.name!r} has stopped or its connection was lost "
            f"({self.server.describe()}).{self.last_words()} Start a new chat to start it "
            "again; if it keeps stopping, run it by hand to see why.",
            MCPErrorCode.SERVER_STOPPED,
        )

    def start_error(self, exc: BaseException) -> OllmError:
        server = self.server
        where = server.describe()
        missing = _leaf(exc, FileNotFoundError)
        if missing is not None and server.command:
            return mcp_error(
                f"MCP server {server.name!r} could not be started: the program "
                f"{server.command!r} was not found. Install it, or fix 'command' in the "
                "server's configuration.",
                MCPErrorCode.SERVER_FAILED,
            )
        closed = _leaf(exc, MCPError)
        if isinstance(closed, MCPError) and closed.code == mcp_types.CONNECTION_CLOSED:
            return mcp_error(
                f"MCP server {server.name!r} stopped before it was ready ({where})."
                f"{self.start_words()} Run the command by hand to see why.",
                MCPErrorCode.SERVER_FAILED,
            )
        if isinstance(closed, MCPError) and _unreadable(closed):
            return mcp_error(
                f"MCP server {server.name!r} could not be started ({where}): its answer "
                f"{unreadable_reason(closed.message)}.{self.start_words()} " + _UNREADABLE_STEP,
                MCPErrorCode.SERVER_ERROR,
            )
        step = (
            "Check that the command starts an MCP server on stdio."
            if server.command
            else "Check the URL, the headers and that the server is running."
        )
        status = f" (HTTP {self.http_status})" if self.http_status else ""
        if self.http_status in (401, 403):
            step = "It wants credentials: check the headers (an Authorization token?)."
        return mcp_error(
            f"MCP server {server.name!r} could not be started or reached ({where}): "
            f"{_describe(exc)}{status}.{self.start_words()} {step}",
            MCPErrorCode.SERVER_FAILED,
        )


@asynccontextmanager
async def _client(session: _Session, stack: AsyncExitStack) -> AsyncIterator[mcp.Client]:
    server, stderr = session.server, session.stderr
    info = mcp_types.Implementation(name="ollm", version=__version__)
    target: Any
    mode = "auto"
    if server.command:
        from mcp.client.stdio import stdio_client

        parameters = mcp.StdioServerParameters(
            command=server.command, args=list(server.args), env=server.env or None, cwd=server.cwd
        )
        target = screened(
            stdio_client(parameters, errlog=cast(TextIO, stderr or sys.stderr)), session.on_stray
        )
    elif server.url:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async def note_status(response: httpx2.Response) -> None:
            # The SDK reports a refused request without its status; messages need it.
            if response.status_code >= 400:
                session.http_status = response.status_code

        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=server.headers,
                timeout=httpx2.Timeout(30.0, read=300.0),
                event_hooks={"response": [note_status]},
            )
        )
        target = screened(streamable_http_client(server.url, http_client=http), session.on_stray)
    else:
        # JSON-RPC over in-memory streams: the path a subprocess takes, cancellation included.
        target, mode = server.server, "legacy"
    # The SDK's tasks, started inside, are marked as this session's (for its log records).
    with in_session():
        async with mcp.Client(target, mode=mode, client_info=info) as client:
            yield client


@contextmanager
def _stderr_file(server: MCPServer) -> Iterator[IO[str] | None]:
    """Where a subprocess's standard error goes: a temporary file, read for error messages."""
    if not server.command:
        yield None
        return
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as file:
        yield file


_UNREADABLE_STEP = (
    "If the server is yours, make its answers flatter or valid MCP; otherwise report it "
    "to its author."
)


def _unreadable(exc: MCPError) -> bool:
    """Whether ``exc`` stands for an answer the SDK could not read (not the server's own)."""
    return exc.code == mcp_types.PARSE_ERROR and exc.message.startswith(PARSING_FAILED)


def _leaf(
    exc: BaseException | None, kind: type[BaseException], depth: int = 0
) -> BaseException | None:
    """``exc`` or the first exception of type ``kind`` in its groups or causes."""
    if exc is None or depth > 8:
        return None
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _leaf(inner, kind, depth + 1)
            if found is not None:
                return found
    return _leaf(exc.__cause__, kind, depth + 1)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    if isinstance(exc, MCPError):
        return f"error {exc.code}: {exc.message}"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
