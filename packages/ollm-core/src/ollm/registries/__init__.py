"""Registries of providers, tools, token counters, tool-calling strategies, toolsets,
middleware, output strategies, compactors and plugin commands.

Internal: not part of ollm's public API (import its public names from ``ollm``:
``ollm.ProviderRegistry``...); its layout may change in any release.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ollm.registries.commands import CommandRegistry
from ollm.registries.compactors import CompactorRegistry
from ollm.registries.middleware import MiddlewareRegistry
from ollm.registries.outputs import OutputStrategyRegistry
from ollm.registries.providers import ProviderRegistry
from ollm.registries.strategies import StrategyRegistry
from ollm.registries.tokens import (
    TokenCounterRegistry,
    UsageAnchors,
    estimate_text_tokens,
    fallback_count,
    request_text,
)
from ollm.registries.tools import ToolRegistry, unknown_tool_message
from ollm.registries.toolsets import ToolsetRegistry
from ollm.types.specs import PluginRecord

__all__ = [
    "CommandRegistry",
    "CompactorRegistry",
    "MiddlewareRegistry",
    "OutputStrategyRegistry",
    "ProviderRegistry",
    "Registries",
    "StrategyRegistry",
    "TokenCounterRegistry",
    "ToolRegistry",
    "ToolsetRegistry",
    "UsageAnchors",
    "estimate_text_tokens",
    "fallback_count",
    "request_text",
    "unknown_tool_message",
]


@dataclass
class Registries:
    """Everything plugins contributed (or the application registered by hand).

    Build an empty one for tests or an embedding app, or get a filled one from
    ``ollm.discover()``. ``plugins`` reports how each plugin loaded.
    """

    providers: ProviderRegistry = field(default_factory=ProviderRegistry)
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    token_counters: TokenCounterRegistry = field(default_factory=TokenCounterRegistry)
    strategies: StrategyRegistry = field(default_factory=StrategyRegistry)
    toolsets: ToolsetRegistry = field(default_factory=ToolsetRegistry)
    middleware: MiddlewareRegistry = field(default_factory=MiddlewareRegistry)
    output_strategies: OutputStrategyRegistry = field(default_factory=OutputStrategyRegistry)
    compactors: CompactorRegistry = field(default_factory=CompactorRegistry)
    commands: CommandRegistry = field(default_factory=CommandRegistry)
    plugins: list[PluginRecord] = field(default_factory=list)

    async def aclose(self) -> None:
        """Close the providers the registries built."""
        await self.providers.aclose()
