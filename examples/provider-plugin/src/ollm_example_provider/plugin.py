"""The plugin module the entry point names. Discovery imports it at every start of ollm:
it registers a factory, and the provider module is imported only when a chat uses it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ollm

if TYPE_CHECKING:
    from ollm_example_provider.provider import PirateProvider


def build() -> PirateProvider:
    from ollm_example_provider.provider import PirateProvider

    return PirateProvider()


@ollm.hookimpl
def ollm_providers() -> list[ollm.ProviderSpec]:
    """The ``pirate`` provider: ``ollm chat -p pirate "hello"``."""
    return [ollm.ProviderSpec("pirate", build, "Echoes your message in pirate speak (an example)")]
