"""Registration module of the ollm_gemini plugin (the ``gemini`` entry point).

Discovery imports this module at start-up, so it imports nothing heavy: the factory
imports the provider (and httpx) the first time it is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import ollm
from ollm.types import ProviderSpec

if TYPE_CHECKING:
    from ollm_gemini._provider import GeminiProvider

__all__ = ["build_configured", "build_provider", "ollm_providers"]


def build_provider() -> GeminiProvider:
    """A ``GeminiProvider`` configured from the environment."""
    from ollm_gemini._provider import GeminiProvider

    return GeminiProvider()


def build_configured(settings: Mapping[str, Any]) -> GeminiProvider:
    """A ``GeminiProvider`` from a table of settings (a pool member's: ``api_key``...)."""
    from ollm_gemini._provider import GeminiProvider

    return GeminiProvider.from_settings(settings)


@ollm.hookimpl
def ollm_providers() -> list[ProviderSpec]:
    """The ``gemini`` provider."""
    return [
        ProviderSpec(
            "gemini",
            build_provider,
            "Google Gemini API: GEMINI_API_KEY (default model gemini-2.5-flash)",
            settings_factory=build_configured,
        )
    ]
