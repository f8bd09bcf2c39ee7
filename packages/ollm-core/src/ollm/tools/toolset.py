"""Toolsets: tool packs that take configuration and hold state (a server, a connection).

A static tool pack (``ollm_tools()``) hands over functions once. A toolset is opened
before a chat uses it and closed after: an MCP server is started and stopped, a database
connection is made and released. The runtime does the opening and closing; a toolset
says how, with one async context manager.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeGuard, runtime_checkable

from ollm.errors import InvalidToolError
from ollm.tools.tool import Tool

__all__ = [
    "TOOLSET_SEPARATOR",
    "Toolset",
    "check_toolset_name",
    "is_toolset",
    "toolset_tool_name",
    "valid_tool_name",
]

TOOLSET_SEPARATOR = "_"
"""Between a toolset's name and its tool's: ``git`` and ``status`` give ``git_status``.

Not ``.``: OpenAI and Anthropic accept only ``[a-zA-Z0-9_-]`` in a tool name, and a
name must be valid for every provider a chat may switch to.
"""

_TOOLSET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


@runtime_checkable
class Toolset(Protocol):
    """A tool pack with a lifetime: opened for the chats that use it, closed after.

    ``name`` prefixes its tools: the toolset ``git`` with a tool ``status`` offers
    ``git_status`` (select them with a glob: ``ollm chat -t 'git_*'``). It must be 1 to
    32 letters, digits, ``_`` or ``-``, starting with a letter or digit.

    ``open()`` returns an async context manager: entering it starts what the toolset
    needs (a subprocess, a connection) and gives its tools, as ``ollm.Tool`` objects
    (``Tool.from_function`` or ``Tool.from_schema``, with a ``validator`` for a JSON
    Schema); leaving it stops everything. The runtime enters and leaves it in one task
    of its own, so the context may keep task groups and cancel scopes open, and it
    leaves it on every path: the chat or the client closing, an error, a cancellation.
    Entering may raise an ``OllmError`` whose message names the toolset and the next
    step; it is shown to the user as the chat's error. The context may also end by
    itself (its server died: cancel a scope around the ``yield``); the runtime then
    opens the toolset afresh for the next chat. A tool may return an
    ``ollm.ToolResult`` for images or an error the model should read, and may raise an
    ``OllmError`` whose code reaches the result (``MCP_SERVER_STOPPED``...).

    Example::

        class Notes:
            name = "notes"

            @contextlib.asynccontextmanager
            async def open(self):
                db = await connect()
                try:
                    yield [ollm.Tool.from_function(db.search, name="search")]
                finally:
                    await db.close()

        client = ollm.ChatClient(model="llama3.2", tools=[Notes()])  # offers notes_search
    """

    name: str

    def open(self) -> AbstractAsyncContextManager[Sequence[Tool]]:
        """Start the toolset and give its tools; leaving the context stops it."""
        ...


def is_toolset(item: object) -> TypeGuard[Toolset]:
    """Whether ``item`` is a toolset (has a ``name`` and an ``open()``), not a tool."""
    return (
        not isinstance(item, Tool)
        and isinstance(getattr(item, "name", None), str)
        and callable(getattr(item, "open", None))
    )


def check_toolset_name(name: Any) -> str:
    """Return ``name`` if it can prefix tool names; raise ``InvalidToolError`` if not."""
    if not isinstance(name, str) or not _TOOLSET_NAME.match(name):
        raise InvalidToolError(
            f"{name!r} is not a valid toolset name: use 1 to 32 letters, digits, '_' or '-', "
            "starting with a letter or a digit."
        )
    return name


def toolset_tool_name(prefix: str, name: str) -> str:
    """The name a model sees for a toolset's tool: ``prefix_name``, valid for every provider."""
    return valid_tool_name(f"{prefix}{TOOLSET_SEPARATOR}{name}")


def valid_tool_name(text: str) -> str:
    """``text`` as a tool name every provider accepts (``[A-Za-z0-9_-]``, 1 to 64 long).

    Other characters become ``_``; a longer name is cut and ends with a short hash of
    the whole, so two long names that differ only at the end stay distinct.
    """
    safe = _UNSAFE.sub("_", text) or "_"
    if len(safe) <= _MAX_NAME:
        return safe
    import hashlib  # only for long names: hashlib costs start-up time

    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
    return f"{safe[: _MAX_NAME - 9]}_{digest}"
