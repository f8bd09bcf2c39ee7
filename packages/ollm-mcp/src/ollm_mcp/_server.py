"""``MCPServer``: one MCP server as an ollm toolset (how to reach it, not the session)."""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from ollm import Tool
from ollm.kit import check_toolset_name

__all__ = ["DEFAULT_STARTUP_TIMEOUT", "MCPServer"]

DEFAULT_STARTUP_TIMEOUT = 60.0
"""Seconds a server has to start and list its tools (``uvx`` may first download it)."""


class MCPServer:
    """One MCP server whose tools a chat can offer: an ``ollm.Toolset``.

    Give exactly one way to reach it:

    - ``command`` (with ``args``, ``env``, ``cwd``): a program started as a subprocess
      that speaks MCP on its standard input and output. Like other MCP clients, it gets
      only a few variables of your environment (``PATH``, ``HOME``...) plus ``env``;
    - ``url`` (with ``headers``): a Streamable HTTP endpoint (often ``.../mcp``);
    - ``server``: an MCP server object of the ``mcp`` SDK (``mcp.server.MCPServer``,
      a low-level ``Server``) run in this process, over in-memory streams.

    ``name`` prefixes its tools (``git`` gives ``git_status``). ``startup_timeout``
    bounds the start and the listing of its tools; ``tool_timeout`` bounds each call
    (else the chat's ``tool_timeout``). ``trust=True`` makes the server's annotations
    (``readOnlyHint``, ``destructiveHint``) its tools' own approval; untrusted, the
    default, they are hints that never relax the policy's default. A server starts when
    the first chat that uses it begins and stops when its ``ChatClient`` closes (or its
    chat ends, if it was given to that chat alone)::

        git = ollm_mcp.MCPServer("git", command="uvx", args=["mcp-server-git"])
        async with ollm.ChatClient(model="qwen3", tools=[git]) as client:
            result = await client.run("What changed in the last commit?")

    Nothing is imported from the ``mcp`` SDK until the server is opened.
    """

    def __init__(
        self,
        name: str,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        server: Any = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        tool_timeout: float | None = None,
        trust: bool = False,
    ) -> None:
        self.name = check_toolset_name(name)
        given = [k for k, v in (("command", command), ("url", url), ("server", server)) if v]
        if len(given) != 1:
            raise ValueError(
                f"MCP server {name!r} needs exactly one of command=, url= or server= "
                f"(got {', '.join(given) or 'none'})"
            )
        if isinstance(args, (str, bytes)):
            raise TypeError("args must be a list of strings, not one string")
        if startup_timeout <= 0 or (tool_timeout is not None and tool_timeout <= 0):
            raise ValueError("timeouts must be positive (tool_timeout may be None)")
        self.command = command
        self.args = tuple(args)
        self.env = dict(env or {})
        self.cwd = cwd
        self.url = url
        self.headers = dict(headers or {})
        self.server = server
        self.startup_timeout = float(startup_timeout)
        self.tool_timeout = tool_timeout
        self.trust = bool(trust)

    @property
    def transport(self) -> str:
        """``stdio``, ``http`` or ``in-process``."""
        if self.command:
            return "stdio"
        return "http" if self.url else "in-process"

    def describe(self) -> str:
        """How the server is reached, for messages (never headers, query or password)."""
        if self.command:
            line = shlex.join([self.command, *self.args])
            return line if len(line) <= 120 else line[:117] + "..."
        if self.url:
            parts = urlsplit(self.url)
            host = parts.hostname or ""
            port = f":{parts.port}" if parts.port else ""
            return f"{parts.scheme}://{host}{port}{parts.path}"
        return f"the in-process server {type(self.server).__name__}"

    @asynccontextmanager
    async def open(self) -> AsyncIterator[list[Tool]]:
        """Start the server (or connect to it), list its tools; stop it on leaving."""
        from ollm_mcp._session import open_session

        async with open_session(self) as tools:
            yield tools

    def __repr__(self) -> str:
        return f"MCPServer({self.name!r}, {self.transport}: {self.describe()})"
