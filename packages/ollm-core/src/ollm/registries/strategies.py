"""Tool-calling strategies that plugins add (``native`` is built into the runtime)."""

from __future__ import annotations

import builtins

from ollm.errors import PluginError
from ollm.types.specs import StrategySpec
from ollm.types.strategy import ToolStrategy

__all__ = ["INSTALL_HINTS", "StrategyRegistry"]

INSTALL_HINTS = {"react": "pip install ollm-react"}


class StrategyRegistry:
    """Strategies by name; each chat gets a fresh strategy object from the factory."""

    def __init__(self) -> None:
        self._specs: dict[str, StrategySpec] = {}

    def register(self, spec: StrategySpec, *, replace: bool = False) -> None:
        """Add a strategy."""
        if spec.name in self._specs and not replace:
            raise ValueError(f"a tool strategy named {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def create(self, name: str) -> ToolStrategy:
        """A new strategy object for one chat."""
        spec = self._specs.get(name)
        if spec is None:
            hint = INSTALL_HINTS.get(name)
            install = f" Install it with: {hint}" if hint else ""
            known = ", ".join(["native", *self._specs])
            raise PluginError(
                f"Tool strategy {name!r} is not installed.{install} Available: {known}."
            )
        try:
            return spec.factory()
        except Exception as exc:
            raise PluginError(
                f"Tool strategy {name!r} failed to start: {type(exc).__name__}: {exc}. "
                "Run `ollm plugins` to see where it comes from."
            ) from exc

    def list(self) -> builtins.list[str]:
        """The registered names."""
        return list(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs
