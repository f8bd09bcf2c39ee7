"""Sub-commands of ``ollm`` that plugins add (``ollm serve``): run only when asked for."""

from __future__ import annotations

import builtins

from ollm.types.specs import CommandSpec

__all__ = ["BUILT_IN_COMMANDS", "CommandRegistry"]

BUILT_IN_COMMANDS = frozenset({"chat", "models", "logs", "plugins", "tools"})
"""ollm's own commands: a plugin cannot take their names."""


class CommandRegistry:
    """Plugin commands by name, in registration order."""

    def __init__(self) -> None:
        self._specs: dict[str, CommandSpec] = {}

    def register(self, spec: CommandSpec, *, replace: bool = False) -> None:
        """Add a command."""
        if not isinstance(spec, CommandSpec):
            raise TypeError("register takes an ollm.CommandSpec")
        if spec.name in BUILT_IN_COMMANDS:
            raise ValueError(f"{spec.name!r} is one of ollm's own commands")
        if spec.name in self._specs and not replace:
            raise ValueError(f"a command named {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def get(self, name: str) -> CommandSpec | None:
        """The command ``name``, if one is registered."""
        return self._specs.get(name)

    def list(self) -> builtins.list[str]:
        """The registered names."""
        return list(self._specs)

    def specs(self) -> builtins.list[CommandSpec]:
        """Every registered command, in registration order."""
        return list(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs
