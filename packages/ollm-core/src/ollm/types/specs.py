"""What plugins contribute through their hooks: providers, token counters, strategies,
toolsets, middleware."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

import msgspec

from ollm.types.provider import ProviderAdapter
from ollm.types.request import ProviderRequest
from ollm.types.strategy import ToolStrategy

__all__ = [
    "CommandSpec",
    "MiddlewareSpec",
    "PluginRecord",
    "PluginStatus",
    "ProviderBuilder",
    "ProviderSpec",
    "StrategySpec",
    "TokenCounter",
    "TokenCounterSpec",
    "ToolsetSpec",
]

TokenCounter = Callable[[ProviderRequest], int]
"""Counts the prompt tokens of a request; must return a positive integer."""


class ProviderBuilder(Protocol):
    """What a composite provider (a pool) is given to build its members with: the
    provider registry (``ollm.ProviderRegistry``), named by the one method it needs, as
    this layer sits under the registries."""

    def build(self, name: str, settings: Mapping[str, Any] | None = None) -> ProviderAdapter:
        """A new provider ``name`` (``NAME`` or ``NAME:PROFILE``), configured with ``settings``."""
        ...


class ProviderSpec(msgspec.Struct, frozen=True):
    """A provider that is built on first use, so discovery never opens a connection.

    ``factory`` takes no arguments and returns the provider; import heavy modules
    (an HTTP client) inside it, not at the top of the plugin module. ``default``
    asks to be the default provider when the user has not chosen one.

    ``profile_factory`` (optional) builds the provider for a named configuration:
    ``-p openai:vllm`` (or ``provider="openai:vllm"``) calls
    ``profile_factory("vllm")``. It should raise an ``OllmError`` naming the known
    profiles when there is no such one.

    ``settings_factory`` (optional) builds the provider from a table of settings, as
    a configuration file gives them: ``{"host": "http://gpu-a:11434", "timeout":
    600}`` (the keyword arguments of the provider's constructor, and ``profile`` for a
    ``NAME:PROFILE``). ``ProviderRegistry.build`` calls it, for a pool's members. It
    should raise an ``OllmError`` naming the settings it takes when given another.

    ``composite_factory`` (optional) is for a provider made of other providers (a pool):
    ``composite_factory(profile, registry)`` builds it for ``NAME`` (``profile`` is
    ``None``) and ``NAME:PROFILE``, with the registry to build its members from
    (``registry.build(...)``). When set, it is used instead of ``factory`` and
    ``profile_factory``.
    """

    name: str
    factory: Callable[[], ProviderAdapter]
    description: str = ""
    default: bool = False
    profile_factory: Callable[[str], ProviderAdapter] | None = None
    settings_factory: Callable[[Mapping[str, Any]], ProviderAdapter] | None = None
    composite_factory: Callable[[str | None, ProviderBuilder], ProviderAdapter] | None = None


class TokenCounterSpec(msgspec.Struct, frozen=True):
    """A token counter for the models whose name matches ``pattern`` (a glob)."""

    pattern: str
    counter: TokenCounter


class StrategySpec(msgspec.Struct, frozen=True):
    """A tool-calling strategy; ``factory`` builds one for each chat."""

    name: str
    factory: Callable[[], ToolStrategy]
    description: str = ""


class ToolsetSpec(msgspec.Struct, frozen=True):
    """A kind of toolset that is built from configuration (``mcp`` from a servers file).

    ``factory(config)`` returns the toolsets (``ollm.Toolset`` objects, checked when
    built) that ``config`` describes (``ollm-mcp`` takes the path of an ``mcpServers``
    JSON file and returns one toolset per server).
    It runs when a command or an application asks for this kind, never at discovery;
    it should read and check the configuration and raise an ``OllmError`` that names
    what is wrong, but start nothing: toolsets start when a chat opens them.
    """

    name: str
    # object: the tools layer, where Toolset lives, sits above this one.
    factory: Callable[[str], Sequence[object]]
    description: str = ""


class MiddlewareSpec(msgspec.Struct, frozen=True):
    """A middleware that a chat uses only when it is named (``--middleware NAME``,
    ``ChatClient(middleware=["NAME"])``): installing it never runs it.

    ``factory()`` builds the middleware object (see ``ollm.types.middleware`` for its
    methods) the first time a client names it; import heavy modules inside it. It may
    read its own settings from the environment there (never at import).
    """

    name: str
    factory: Callable[[], object]
    description: str = ""


class CommandSpec(msgspec.Struct, frozen=True):
    """A sub-command of ``ollm`` that a plugin adds (``ollm serve``): see
    ``ollm.hookspecs.ollm_commands``.

    ``configure(parser)`` adds the command's arguments to its ``argparse`` parser;
    ``run(args)`` runs it with the parsed ``argparse.Namespace`` and returns the exit
    code (``None`` is 0); a coroutine function runs on the chosen async backend. Both are
    called only when the command is used: import heavy modules inside them.
    """

    name: str
    help: str
    # Any, not argparse's types: this module must not import argparse.
    configure: Callable[[Any], None]
    run: Callable[[Any], int | Awaitable[int | None] | None]
    description: str = ""


PluginStatus = Literal["loaded", "failed", "blocked", "disabled"]


class PluginRecord(msgspec.Struct, frozen=True, omit_defaults=True):
    """How loading one plugin went, for ``ollm plugins`` and for plugin authors.

    ``phase`` says where a failure happened: ``import``, ``register`` or the name of
    the hook that raised (``ollm_tools``...). ``skipped`` lists the items of a loaded
    plugin that were left out because another plugin has their name (and why).
    """

    name: str
    status: PluginStatus
    distribution: str | None = None
    version: str | None = None
    module: str | None = None
    hooks: tuple[str, ...] = ()
    phase: str | None = None
    error: str | None = None
    contributes: dict[str, list[str]] = msgspec.field(default_factory=dict)
    skipped: tuple[str, ...] = ()
