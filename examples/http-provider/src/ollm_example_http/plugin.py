"""The plugin module the entry point names: a factory, so discovery imports no HTTP client."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ollm

if TYPE_CHECKING:
    from ollm_example_http.provider import MiniProvider


def build() -> MiniProvider:
    from ollm_example_http.provider import MiniProvider

    return MiniProvider()


@ollm.hookimpl
def ollm_providers() -> list[ollm.ProviderSpec]:
    """The ``mini`` provider: ``ollm chat -p mini -m MODEL hi`` (``MINI_BASE_URL``)."""
    return [ollm.ProviderSpec("mini", build, "Any OpenAI-compatible server (an example)")]
