"""Read the ``mcpServers`` configuration that Claude Desktop, Cursor and others use."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ollm.errors import InvalidToolError
from ollm_mcp._errors import MCPErrorCode, mcp_error
from ollm_mcp._server import DEFAULT_STARTUP_TIMEOUT, MCPServer

__all__ = ["load_servers"]

_EXAMPLE = (
    '{"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}, '
    '"remote": {"url": "https://example.com/mcp"}}}'
)
_HTTP_TYPES = ("http", "streamable-http", "streamable_http", "streamableHttp")


class _Entry(msgspec.Struct, kw_only=True):
    """One server's entry; other clients' own keys (``autoApprove``...) are ignored."""

    command: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    type: str | None = None
    disabled: bool = False
    startup_timeout_sec: float = DEFAULT_STARTUP_TIMEOUT
    tool_timeout_sec: float | None = None
    trust: bool = False


def load_servers(config: str | os.PathLike[str] | Mapping[str, Any]) -> list[MCPServer]:
    """The servers of an ``mcpServers`` configuration: a file's path, JSON text, or a dict.

    The shape is the one other MCP clients use (``servers`` as VS Code names it is
    accepted too)::

        {"mcpServers": {
            "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"A": "1"}},
            "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "..."}}
        }}

    A stdio entry takes ``command``, ``args``, ``env`` and ``cwd`` (relative to the
    file); an HTTP one ``url`` and ``headers``. ``disabled: true`` skips an entry;
    ``startup_timeout_sec`` and ``tool_timeout_sec`` set its timeouts; ``trust: true``
    lets its annotations relax the approval policy's default. Raises an
    ``ollm.ToolsetError`` with code ``MCP_CONFIG_INVALID`` naming the file, the
    server and the field when something is wrong; nothing is started here.
    """
    where, data, base = _read(config)
    if not isinstance(data, dict):
        raise _invalid(where, f"it holds {_kind(data)}, not a JSON object like {_EXAMPLE}")
    servers = data.get("mcpServers", data.get("servers"))
    if servers is None:
        raise _invalid(where, f"it has no 'mcpServers' object. Expected: {_EXAMPLE}")
    if not isinstance(servers, dict):
        raise _invalid(where, f"'mcpServers' is {_kind(servers)}, not an object of servers")
    made: list[MCPServer] = []
    for name, raw in servers.items():
        if not isinstance(raw, dict):
            raise _invalid(where, f"server {name!r} is {_kind(raw)}, not an object")
        try:
            entry = msgspec.convert(raw, _Entry)
        except msgspec.ValidationError as exc:
            raise _invalid(where, f"server {name!r}: {exc}") from None
        if entry.disabled:
            continue
        made.append(_server(where, base, str(name), entry))
    return made


def _read(config: str | os.PathLike[str] | Mapping[str, Any]) -> tuple[str, Any, Path]:
    """Where the configuration comes from (for messages), its data, and its folder."""
    if isinstance(config, Mapping):
        return "the MCP configuration", dict(config), Path.cwd()
    text = os.fspath(config)
    if text.lstrip().startswith("{"):
        where, raw, base = "the MCP configuration given as JSON", text.encode(), Path.cwd()
    else:
        path = Path(text).expanduser()
        where = f"MCP servers file {str(path)!r}"
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise _invalid(
                where, "it does not exist. Fix the path given to --mcp or OLLM_MCP_CONFIG"
            ) from None
        except OSError as exc:
            raise _invalid(where, f"it cannot be read ({exc.strerror or exc})") from None
        base = path.resolve().parent
    try:
        return where, msgspec.json.decode(raw), base
    except msgspec.DecodeError as exc:
        raise _invalid(where, f"it is not valid JSON ({exc})") from None


def _server(where: str, base: Path, name: str, entry: _Entry) -> MCPServer:
    kind = (entry.type or "").strip()
    if kind == "sse":
        raise _invalid(
            where,
            f"server {name!r} uses the older SSE transport, which ollm-mcp does not speak. "
            "Give the URL of its Streamable HTTP endpoint (often ending in /mcp)",
        )
    if kind and kind != "stdio" and kind not in _HTTP_TYPES:
        raise _invalid(where, f"server {name!r} has an unknown type {kind!r}: use stdio or http")
    if entry.command and entry.url:
        raise _invalid(where, f"server {name!r} has both 'command' and 'url': keep one")
    if not entry.command and not entry.url:
        raise _invalid(
            where,
            f"server {name!r} needs 'command' (a program to start) or 'url' (a Streamable "
            "HTTP endpoint)",
        )
    cwd = entry.cwd
    if cwd is not None:
        cwd = str((base / Path(cwd).expanduser()).resolve())
    try:
        return MCPServer(
            name,
            command=entry.command,
            args=entry.args,
            env=entry.env,
            cwd=cwd,
            url=entry.url,
            headers=entry.headers,
            startup_timeout=entry.startup_timeout_sec,
            tool_timeout=entry.tool_timeout_sec,
            trust=entry.trust,
        )
    except InvalidToolError:
        raise _invalid(
            where,
            f"the server name {name!r} cannot prefix tool names: use 1 to 32 letters, digits, "
            "'_' or '-', starting with a letter or a digit",
        ) from None
    except ValueError as exc:
        raise _invalid(where, f"server {name!r}: {exc}") from None


def _invalid(where: str, problem: str) -> Exception:
    return mcp_error(f"Cannot use {where}: {problem}.", MCPErrorCode.CONFIG_INVALID)


def _kind(value: Any) -> str:
    names = {list: "a list", str: "a string", int: "a number", float: "a number"}
    return names.get(type(value), "null" if value is None else type(value).__name__)
