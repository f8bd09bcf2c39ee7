"""Registration module of the ollm_anthropic plugin (the ``anthropic`` entry point).

Discovery imports this module at start-up, so it imports nothing heavy and reads no
file: the factories import the provider (and httpx) the first time it is used, and a
profile (``-p anthropic:local``) is read from the profiles file only then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import ollm
from ollm.types import ProviderSpec

if TYPE_CHECKING:
    from ollm_anthropic._provider import AnthropicProvider

__all__ = ["build_configured", "build_profile", "build_provider", "ollm_providers"]


def build_provider() -> AnthropicProvider:
    """An ``AnthropicProvider`` configured from the environment."""
    from ollm_anthropic._provider import AnthropicProvider

    return AnthropicProvider()


def build_profile(profile: str) -> AnthropicProvider:
    """An ``AnthropicProvider`` for the named profile of the profiles file."""
    from ollm_anthropic._provider import AnthropicProvider

    return AnthropicProvider(profile=profile)


def build_configured(settings: Mapping[str, Any]) -> AnthropicProvider:
    """An ``AnthropicProvider`` from a table of settings (a pool member's: ``api_key``...)."""
    from ollm_anthropic._provider import AnthropicProvider

    return AnthropicProvider.from_settings(settings)


@ollm.hookimpl
def ollm_providers() -> list[ProviderSpec]:
    """The ``anthropic`` provider, and ``anthropic:NAME`` for each profile."""
    return [
        ProviderSpec(
            "anthropic",
            build_provider,
            "Anthropic's Messages API: ANTHROPIC_API_KEY (default model claude-sonnet-4-6), "
            "or -p anthropic:PROFILE",
            profile_factory=build_profile,
            settings_factory=build_configured,
        )
    ]
