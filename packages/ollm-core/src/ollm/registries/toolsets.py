"""The kinds of toolset that plugins provide (``mcp``...), built from configuration."""

from __future__ import annotations

import builtins

from ollm.errors import OllmError, PluginError
from ollm.tools.toolset import Toolset, check_toolset_name, is_toolset
from ollm.types.specs import ToolsetSpec

__all__ = ["TOOLSET_INSTALL_HINTS", "ToolsetRegistry"]

TOOLSET_INSTALL_HINTS = {"mcp": "pip install ollm-mcp"}


class ToolsetRegistry:
    """Toolset kinds by name; ``create(kind, config)`` builds the toolsets a config describes."""

    def __init__(self) -> None:
        self._specs: dict[str, ToolsetSpec] = {}

    def register(self, spec: ToolsetSpec, *, replace: bool = False) -> None:
        """Add a kind of toolset."""
        if spec.name in self._specs and not replace:
            raise ValueError(f"a toolset kind named {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def get(self, name: str) -> ToolsetSpec:
        """The kind called ``name``; the error says what to install when it is missing."""
        spec = self._specs.get(name)
        if spec is None:
            hint = TOOLSET_INSTALL_HINTS.get(name)
            install = f" Install it with: {hint}" if hint else ""
            known = ", ".join(self._specs) or "none"
            raise PluginError(
                f"Toolset kind {name!r} is not installed.{install} Installed kinds: {known}."
            )
        return spec

    def create(self, name: str, config: str) -> builtins.list[Toolset]:
        """Build the toolsets that ``config`` describes for the kind ``name``."""
        spec = self.get(name)
        try:
            given = list(spec.factory(config))
        except OllmError:
            raise
        except Exception as exc:
            raise PluginError(
                f"Toolset kind {name!r} could not read its configuration {config!r}: "
                f"{type(exc).__name__}: {exc}. Run `ollm plugins` to see where it comes from."
            ) from exc
        made: builtins.list[Toolset] = []
        for toolset in given:
            if not is_toolset(toolset):
                raise PluginError(
                    f"Toolset kind {name!r} returned {type(toolset).__name__}, which is not a "
                    "toolset (it needs a name and an open() method). Report this to its author."
                )
            check_toolset_name(toolset.name)
            made.append(toolset)
        return made

    def list(self) -> builtins.list[str]:
        """The registered kinds."""
        return list(self._specs)

    def specs(self) -> builtins.list[ToolsetSpec]:
        """Every registered kind, in registration order."""
        return list(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        return len(self._specs)
