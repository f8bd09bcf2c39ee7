"""Compactors that plugins add (ollm's own come from its built-in plugin, and work
without it: see ``ollm.runtime.compaction``)."""

from __future__ import annotations

import builtins

from ollm.types.compactor import CompactorSpec

__all__ = ["CompactorRegistry"]


class CompactorRegistry:
    """Compactors by name; each chat gets a fresh object from the factory."""

    def __init__(self) -> None:
        self._specs: dict[str, CompactorSpec] = {}

    def register(self, spec: CompactorSpec, *, replace: bool = False) -> None:
        """Add a compactor."""
        if not isinstance(spec, CompactorSpec):
            raise TypeError("register takes an ollm.CompactorSpec")
        if spec.name in self._specs and not replace:
            raise ValueError(f"a compactor named {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def specs(self) -> dict[str, CompactorSpec]:
        """Every registered compactor by name, in registration order (a chat builds
        the one it names with ``ollm.runtime.compaction.resolve_compactor``)."""
        return dict(self._specs)

    def list(self) -> builtins.list[str]:
        """The registered names."""
        return list(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs
