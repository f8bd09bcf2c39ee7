"""The toolsets a command was given: ``--toolset KIND=CONFIG``, ``--mcp FILE``, or the
environment (``OLLM_<KIND>_CONFIG``), built by the plugin that provides each kind."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from ollm.errors import InvalidRequestError, OllmError
from ollm.plugins.settings import environment_name
from ollm.registries import Registries
from ollm.runtime.toolsets import ToolsetSessions
from ollm.tools.tool import Tool
from ollm.tools.toolset import Toolset

__all__ = ["ToolsetListing", "config_variable", "list_toolsets", "load_toolsets"]

ToolsetListing = list[tuple[Toolset, dict[str, Tool] | OllmError]]


def config_variable(kind: str) -> str:
    """The environment variable that configures a toolset kind: ``OLLM_MCP_CONFIG``
    (``OLLM_MY_NOTES_CONFIG`` for ``my.notes``: see ``environment_name``)."""
    return f"OLLM_{environment_name(kind)}_CONFIG"


def load_toolsets(
    args: Any, registries: Registries, environ: Mapping[str, str] | None = None
) -> list[Toolset]:
    """Build the toolsets of ``--toolset``/``--mcp``, else of ``OLLM_<KIND>_CONFIG``.

    A kind given on the command line is configured there only; the environment
    configures the installed kinds the command line did not mention.
    """
    env = os.environ if environ is None else environ
    wanted: list[tuple[str, str]] = [("mcp", path) for path in getattr(args, "mcp", None) or ()]
    for item in getattr(args, "toolset", None) or ():
        kind, sep, config = item.partition("=")
        if not sep or not kind.strip() or not config.strip():
            raise InvalidRequestError(
                f"--toolset {item!r} is not KIND=CONFIG. For example: --toolset mcp=servers.json"
            )
        wanted.append((kind.strip(), config.strip()))
    named = {kind for kind, _ in wanted}
    for kind in registries.toolsets.list():
        value = env.get(config_variable(kind), "").strip()
        if value and kind not in named:
            wanted.append((kind, value))
    toolsets: list[Toolset] = []
    for kind, config in wanted:
        for toolset in registries.toolsets.create(kind, config):
            if any(toolset.name == known.name for known in toolsets):
                raise InvalidRequestError(
                    f"two toolsets are named {toolset.name!r} (in {config!r} and an earlier "
                    "configuration): rename one, since the name prefixes its tools"
                )
            toolsets.append(toolset)
    return toolsets


async def list_toolsets(toolsets: Sequence[Toolset], sessions: ToolsetSessions) -> ToolsetListing:
    """Open every toolset at once and give its tools, or the error it failed with.

    They stay open in ``sessions``; the caller closes them.
    """
    found: dict[int, dict[str, Tool] | OllmError] = {}

    async def open_one(toolset: Toolset) -> None:
        try:
            found[id(toolset)] = await sessions.tools(toolset)
        except OllmError as exc:
            found[id(toolset)] = exc

    async with anyio.create_task_group() as group:
        for toolset in toolsets:
            group.start_soon(open_one, toolset)
    return [(toolset, found[id(toolset)]) for toolset in toolsets]
