"""Output strategies that plugins add (``native`` and ``tool`` are built into the runtime)."""

from __future__ import annotations

import builtins

from ollm.registries.strategies import create_named
from ollm.types.output import OutputStrategy, OutputStrategySpec

__all__ = ["BUILT_IN", "OutputStrategyRegistry"]

BUILT_IN = ("auto", "native", "tool")
"""The output strategies of core itself (``ChatSettings.output_strategy``)."""


class OutputStrategyRegistry:
    """Output strategies by name; each chat gets a fresh object from the factory."""

    def __init__(self) -> None:
        self._specs: dict[str, OutputStrategySpec] = {}

    def register(self, spec: OutputStrategySpec, *, replace: bool = False) -> None:
        """Add an output strategy."""
        if not isinstance(spec, OutputStrategySpec):
            raise TypeError("register takes an ollm.OutputStrategySpec")
        if spec.name in self._specs and not replace:
            raise ValueError(f"an output strategy named {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def create(self, name: str) -> OutputStrategy:
        """A new output strategy object for one chat."""
        strategy: OutputStrategy = create_named("Output strategy", self._specs, name, BUILT_IN)
        return strategy

    def list(self) -> builtins.list[str]:
        """The registered names."""
        return list(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs
