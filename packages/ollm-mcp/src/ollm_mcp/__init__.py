"""ollm-mcp: the tools of any MCP server as an ollm tool pack.

Each MCP server is an ``ollm.Toolset``: it starts when a chat first uses it, its tools
are offered under the server's name (``git_status``), and it stops when the client
closes. On the command line, ``ollm chat --mcp servers.json -t 'git_*'`` (the file in
the ``mcpServers`` shape of Claude Desktop and Cursor, or ``OLLM_MCP_CONFIG``); in
Python::

    import ollm, ollm_mcp

    git = ollm_mcp.MCPServer("git", command="uvx", args=["mcp-server-git"])
    async with ollm.ChatClient(model="qwen3", tools=[git]) as client:
        print((await client.run("Summarise the last commit")).text)

The public names:

- ``MCPServer``: one server (``command=``, ``url=`` or an in-process ``server=``);
- ``load_servers``: the servers of an ``mcpServers`` file, JSON text or dict;
- ``MCPErrorCode``: the codes of its errors (``MCP_SERVER_FAILED``...).

Names load on first use; the ``mcp`` SDK only when a server is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.kit import lazy_exports
from ollm_mcp._version import __version__

if TYPE_CHECKING:
    from ollm_mcp._config import load_servers
    from ollm_mcp._errors import MCPErrorCode
    from ollm_mcp._server import DEFAULT_STARTUP_TIMEOUT, MCPServer

__all__ = ["DEFAULT_STARTUP_TIMEOUT", "MCPErrorCode", "MCPServer", "__version__", "load_servers"]

_WHERE = {
    "DEFAULT_STARTUP_TIMEOUT": "._server",
    "MCPErrorCode": "._errors",
    "MCPServer": "._server",
    "load_servers": "._config",
}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE, globals())
