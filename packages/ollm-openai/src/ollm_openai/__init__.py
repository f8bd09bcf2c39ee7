"""ollm_openai: OpenAI-compatible servers for ollm.

``OpenAIProvider`` chats (streaming or not, tools, reasoning, images, JSON output),
lists models, embeds texts and checks the server's health, on OpenAI itself and on the
servers that speak its Chat Completions API: vLLM, SGLang, llama.cpp's
``llama-server``, LM Studio, a LiteLLM proxy, Ollama's ``/v1``. Installing the package
registers it as the ``openai`` provider; ``-p openai:NAME`` picks a named profile of
``openai.toml``. Names load on first use, so discovering the plugin imports no HTTP
client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.kit import lazy_exports
from ollm_openai._version import __version__

if TYPE_CHECKING:
    from ollm_openai._config import OpenAIConfig, Profile, load_profiles, profiles_path
    from ollm_openai._convert import ToolCallAssembler, message_to_openai, tool_to_openai
    from ollm_openai._provider import OpenAIProvider
    from ollm_openai._wire import ToolCallDelta

_LAZY: dict[str, str] = {
    "OpenAIConfig": "ollm_openai._config",
    "OpenAIProvider": "ollm_openai._provider",
    "Profile": "ollm_openai._config",
    "ToolCallAssembler": "ollm_openai._convert",
    "ToolCallDelta": "ollm_openai._wire",
    "load_profiles": "ollm_openai._config",
    "message_to_openai": "ollm_openai._convert",
    "profiles_path": "ollm_openai._config",
    "tool_to_openai": "ollm_openai._convert",
}

__all__ = [
    "OpenAIConfig",
    "OpenAIProvider",
    "Profile",
    "ToolCallAssembler",
    "ToolCallDelta",
    "__version__",
    "load_profiles",
    "message_to_openai",
    "profiles_path",
    "tool_to_openai",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
