"""The ``mcp`` plugin: registers the ``mcp`` toolset kind with ollm.

Discovery imports this module at start-up, so it imports nothing of the ``mcp`` SDK
(pydantic, httpx2, starlette...): the factory reads the configuration file only when a
command asks for it (``ollm chat --mcp servers.json``), and a server's session imports
the SDK when a chat opens it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ollm.hookspecs import hookimpl
from ollm.types import ToolsetSpec

if TYPE_CHECKING:
    from ollm import Toolset

__all__ = ["ollm_toolsets"]


def _servers(config: str) -> Sequence[Toolset]:
    from ollm_mcp._config import load_servers

    return load_servers(config)


@hookimpl
def ollm_toolsets() -> list[ToolsetSpec]:
    """The tools of MCP servers, from an ``mcpServers`` JSON file."""
    return [
        ToolsetSpec(
            "mcp",
            _servers,
            "The tools of MCP servers (stdio or Streamable HTTP), from an mcpServers JSON file",
        )
    ]
