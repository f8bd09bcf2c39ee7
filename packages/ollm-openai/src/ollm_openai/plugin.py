"""Registration module of the ollm_openai plugin (the ``openai`` entry point).

Discovery imports this module at start-up, so it imports nothing heavy and reads no
file: the factories import the provider (and httpx) the first time it is used, and a
profile (``-p openai:vllm``) is read from the profiles file only then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import ollm
from ollm.types import ProviderSpec

if TYPE_CHECKING:
    from ollm_openai._provider import OpenAIProvider

__all__ = ["build_configured", "build_profile", "build_provider", "ollm_providers"]


def build_provider() -> OpenAIProvider:
    """An ``OpenAIProvider`` configured from the environment."""
    from ollm_openai._provider import OpenAIProvider

    return OpenAIProvider()


def build_profile(profile: str) -> OpenAIProvider:
    """An ``OpenAIProvider`` for the named profile of the profiles file."""
    from ollm_openai._provider import OpenAIProvider

    return OpenAIProvider(profile=profile)


def build_configured(settings: Mapping[str, Any]) -> OpenAIProvider:
    """An ``OpenAIProvider`` from a table of settings (a pool member's: ``base_url``,
    ``profile``...)."""
    from ollm_openai._provider import OpenAIProvider

    return OpenAIProvider.from_settings(settings)


@ollm.hookimpl
def ollm_providers() -> list[ProviderSpec]:
    """The ``openai`` provider, and ``openai:NAME`` for each profile."""
    return [
        ProviderSpec(
            "openai",
            build_provider,
            "OpenAI-compatible servers: OPENAI_BASE_URL, or -p openai:PROFILE",
            profile_factory=build_profile,
            settings_factory=build_configured,
        )
    ]
