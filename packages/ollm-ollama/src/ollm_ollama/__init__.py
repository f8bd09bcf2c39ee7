"""ollm_ollama: the Ollama provider for ollm.

``OllamaProvider`` chats (streaming, tools, thinking, images), manages models (list,
show, pull, delete, copy, running models), embeds texts and checks the server's
health. Installing the package registers it as the ``ollama`` provider, the default
one. Names load on first use, so discovering the plugin imports no HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.kit import lazy_exports
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


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
