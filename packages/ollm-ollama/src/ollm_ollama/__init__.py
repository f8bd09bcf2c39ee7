"""ollm_ollama: the Ollama provider for ollm.

``OllamaProvider`` chats (streaming, tools, thinking, images), manages models (list,
show, pull, delete, copy, running models), embeds texts and checks the server's
health. Installing the package registers it as the ``ollama`` provider, the default
one. Names load on first use, so discovering the plugin imports no HTTP client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ollm_ollama._version import __version__

if TYPE_CHECKING:
    from ollm_ollama._config import OllamaConfig, parse_host
    from ollm_ollama._interop import (
        message_from_ollama,
        message_to_ollama,
        tool_from_ollama,
        tool_to_ollama,
    )
    from ollm_ollama._provider import OllamaProvider

_LAZY: dict[str, str] = {
    "OllamaConfig": "ollm_ollama._config",
    "OllamaProvider": "ollm_ollama._provider",
    "message_from_ollama": "ollm_ollama._interop",
    "message_to_ollama": "ollm_ollama._interop",
    "parse_host": "ollm_ollama._config",
    "tool_from_ollama": "ollm_ollama._interop",
    "tool_to_ollama": "ollm_ollama._interop",
}

__all__ = [
    "OllamaConfig",
    "OllamaProvider",
    "__version__",
    "message_from_ollama",
    "message_to_ollama",
    "parse_host",
    "tool_from_ollama",
    "tool_to_ollama",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ollm_ollama' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
