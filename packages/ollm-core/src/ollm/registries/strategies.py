"""Tool-calling strategies that plugins add (``native`` is built into the runtime)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ollm.errors import PluginError
from ollm.types.specs import StrategySpec
from ollm.types.strategy import ToolStrategy

__all__ = ["INSTALL_HINTS", "StrategyRegistry", "create_named"]

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
        strategy: ToolStrategy = create_named("Tool strategy", self._specs, name)
        return strategy

    def list(self) -> builtins.list[str]:
        """The registered names."""
        return list(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs


class _Spec(Protocol):
    @property
    def factory(self) -> Callable[[], Any]: ...


def create_named(
    kind: str, specs: Mapping[str, _Spec], name: str, builtin: Sequence[str] = ("native",)
) -> Any:
    """What the factory of ``specs[name]`` builds (a strategy for one chat); a
    ``PluginError`` naming the ones there are (``builtin`` first) when it is not
    installed or fails."""
    spec = specs.get(name)
    if spec is None:
        hint = INSTALL_HINTS.get(name)
        install = f" Install it with: {hint}" if hint else ""
        known = ", ".join(dict.fromkeys([*builtin, *specs]))
        raise PluginError(f"{kind} {name!r} is not installed.{install} Available: {known}.")
    try:
        return spec.factory()
    except Exception as exc:
        raise PluginError(
            f"{kind} {name!r} failed to start: {type(exc).__name__}: {exc}. "
            "Run `ollm plugins` to see where it comes from."
        ) from exc
