"""Registration module of the ollm_llamacpp plugin (the ``llamacpp`` entry point).

Discovery imports this module at start-up, so it imports nothing heavy: llama-cpp-python
(and numpy with it) is imported the first time a model loads, never at discovery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import ollm
from ollm.types import ProviderSpec

if TYPE_CHECKING:
    from ollm_llamacpp._provider import LlamaCppProvider

__all__ = ["build_provider", "ollm_providers"]


def build_provider() -> LlamaCppProvider:
    """A ``LlamaCppProvider`` configured from the environment."""
    from ollm_llamacpp._provider import LlamaCppProvider

    return LlamaCppProvider()


@ollm.hookimpl
def ollm_providers() -> list[ProviderSpec]:
    """The ``llamacpp`` provider: a GGUF model inside the process, no server."""
    return [
        ProviderSpec(
            "llamacpp",
            build_provider,
            "A GGUF model inside this process (llama.cpp): -m FILE.gguf or a name in "
            "OLLM_LLAMACPP_MODELS",
        )
    ]
