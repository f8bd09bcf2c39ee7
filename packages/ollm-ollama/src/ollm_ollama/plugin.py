"""Registration module of the ollm_ollama plugin (the ``ollama`` entry point).

Discovery imports this module at start-up, so it imports nothing heavy: the factory
imports the provider (and httpx) the first time the provider is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import ollm
from ollm.types import ProviderSpec

if TYPE_CHECKING:
    from ollm_ollama._provider import OllamaProvider

__all__ = ["build_configured", "build_provider", "ollm_providers"]


def build_provider() -> OllamaProvider:
    """An ``OllamaProvider`` configured from the environment."""
    from ollm_ollama._provider import OllamaProvider

    return OllamaProvider()


def build_configured(settings: Mapping[str, Any]) -> OllamaProvider:
    """An ``OllamaProvider`` from a table of settings (a pool member's: ``host``...)."""
    from ollm_ollama._provider import OllamaProvider

    return OllamaProvider.from_settings(settings)


@ollm.hookimpl
def ollm_providers() -> list[ProviderSpec]:
    """The ``ollama`` provider, the default one when it is installed."""
    return [
        ProviderSpec(
            "ollama",
            build_provider,
            "Ollama on this machine or OLLAMA_HOST",
            default=True,
            settings_factory=build_configured,
        )
    ]
