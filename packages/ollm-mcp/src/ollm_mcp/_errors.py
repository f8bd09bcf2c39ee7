"""The stable codes of ollm-mcp's errors, and the messages that name the server."""

from __future__ import annotations

from typing import IO

from ollm.errors import ToolsetError

__all__ = ["MCPErrorCode", "mcp_error", "stderr_tail"]


class MCPErrorCode:
    """The codes ollm-mcp's errors carry (in ``error.code`` and in error events)."""

    CONFIG_INVALID = "MCP_CONFIG_INVALID"
    """The servers file (or a server's entry in it) cannot be used."""
    SERVER_FAILED = "MCP_SERVER_FAILED"
    """A server could not be started or reached, or refused to begin a session."""
    SERVER_TIMEOUT = "MCP_SERVER_TIMEOUT"
    """A server did not answer within its ``startup_timeout_sec``."""
    SERVER_STOPPED = "MCP_SERVER_STOPPED"
    """A server exited, or its connection was lost, while a chat used it."""
    SERVER_ERROR = "MCP_SERVER_ERROR"
    """A server answered a call with a protocol error, or with something that is not MCP."""


def mcp_error(message: str, code: str) -> ToolsetError:
    """An ``ollm.ToolsetError`` with one of the codes of ``MCPErrorCode``."""
    return ToolsetError(message, code=code)


_TAIL_BYTES = 4096
_TAIL_CHARS = 600


def stderr_tail(stream: IO[str] | None) -> str:
    """The last lines a server wrote to its standard error, as one short line (or "")."""
    if stream is None:
        return ""
    try:
        stream.flush()
        end = stream.seek(0, 2)
        stream.seek(max(0, end - _TAIL_BYTES))
        text = stream.read()
    except (OSError, ValueError):
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    tail = " | ".join(lines[-6:])
    if len(tail) > _TAIL_CHARS:
        tail = "..." + tail[-_TAIL_CHARS:]
    return tail
