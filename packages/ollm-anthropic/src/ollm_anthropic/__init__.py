"""ollm_anthropic: Claude, and the servers that speak Anthropic's Messages API, for ollm.

``AnthropicProvider`` streams chats with parallel tool use, thinking (its blocks and
signatures sent back unchanged), images, typed output through a forced tool and the
prompt cache; counts tokens with ``count_tokens``; lists models; checks the API's
health. Installing the package registers it as the ``anthropic`` provider (``ollm chat
-p anthropic``, ``-p anthropic:PROFILE`` for a compatible server). It speaks the REST API
through ollm-http: no Anthropic SDK is imported. Names load on first use, so discovering
the plugin imports no HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.kit import lazy_exports
from ollm_anthropic._version import __version__

if TYPE_CHECKING:
    from ollm_anthropic._config import AnthropicConfig, Profile, load_profiles
    from ollm_anthropic._convert import build_body, default_max_tokens, messages_of, tools_of
    from ollm_anthropic._provider import AnthropicProvider

_LAZY: dict[str, str] = {
    "AnthropicConfig": "ollm_anthropic._config",
    "AnthropicProvider": "ollm_anthropic._provider",
    "Profile": "ollm_anthropic._config",
    "build_body": "ollm_anthropic._convert",
    "default_max_tokens": "ollm_anthropic._convert",
    "load_profiles": "ollm_anthropic._config",
    "messages_of": "ollm_anthropic._convert",
    "tools_of": "ollm_anthropic._convert",
}

__all__ = [
    "AnthropicConfig",
    "AnthropicProvider",
    "Profile",
    "__version__",
    "build_body",
    "default_max_tokens",
    "load_profiles",
    "messages_of",
    "tools_of",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
