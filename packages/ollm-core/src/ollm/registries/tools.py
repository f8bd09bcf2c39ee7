"""The tool registry: every tool that tool packs (or the application) provide."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from typing import Any

from ollm.errors import ToolNotFoundError
from ollm.tools.tool import Tool

__all__ = ["ToolRegistry", "unknown_tool_message"]


class ToolRegistry:
    """Tools by name. A chat offers the model only the tools it enables."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(
        self, tool: Tool | Callable[..., Any], *, pack: str | None = None, replace: bool = False
    ) -> Tool:
        """Add a tool (a plain function is made into one); names are unique unless ``replace``."""
        made = tool if isinstance(tool, Tool) else Tool.from_function(tool)
        if pack is not None and made.pack is None:
            made.pack = pack
        if made.name in self._tools and not replace:
            owner = self._tools[made.name].pack
            where = f" by tool pack {owner!r}" if owner else ""
            raise ValueError(f"a tool named {made.name!r} is already registered{where}")
        self._tools[made.name] = made
        return made

    def unregister(self, name: str) -> None:
        """Remove a tool if present."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool:
        """The tool called ``name``."""
        tool = self._tools.get(name)
        if tool is None:
            raise ToolNotFoundError(unknown_tool_message(name, list(self._tools)))
        return tool

    def select(self, items: Iterable[str | Tool | Callable[..., Any]]) -> dict[str, Tool]:
        """Resolve a chat's tools: names from this registry, or tools given directly."""
        chosen: dict[str, Tool] = {}
        for item in items:
            tool = self.get(item) if isinstance(item, str) else Tool.from_function(item)
            chosen[tool.name] = tool
        return chosen

    def list(self) -> builtins.list[str]:
        """Every tool name, in registration order."""
        return list(self._tools)

    def tools(self) -> builtins.list[Tool]:
        """Every tool, in registration order."""
        return list(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


def unknown_tool_message(name: str, available: list[str]) -> str:
    """'Tool X not found' with the closest name and the list, as the model or user needs."""
    if not available:
        return f"Tool {name!r} is not available: no tools are enabled."
    folded = {a.lower(): a for a in available}
    import difflib  # only for this message: it is slow to import

    close = difflib.get_close_matches(name.lower(), list(folded), n=1, cutoff=0.6)
    hint = f" Did you mean {folded[close[0]]!r}?" if close else ""
    return f"Tool {name!r} is not available.{hint} Available tools: {', '.join(available)}."
