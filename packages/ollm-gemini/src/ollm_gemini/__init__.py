"""ollm_gemini: Google's Gemini models for ollm, through the Gemini API.

``GeminiProvider`` streams chats with function calling (thought signatures kept),
thinking, images and JSON output; counts tokens exactly with ``countTokens``; lists
models; embeds texts with ``batchEmbedContents``; checks the API's health. Installing the
package registers it as the ``gemini`` provider (``ollm chat -p gemini``). It speaks the
REST API through ollm-http: no Google SDK is imported. Names load on first use, so
discovering the plugin imports no HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.kit import lazy_exports
from ollm_gemini._version import __version__

if TYPE_CHECKING:
    from ollm_gemini._config import GeminiConfig
    from ollm_gemini._convert import build_body, contents_of, tools_of
    from ollm_gemini._provider import GeminiProvider
    from ollm_gemini._schema import Unexpressible, to_gemini_schema

_LAZY: dict[str, str] = {
    "GeminiConfig": "ollm_gemini._config",
    "GeminiProvider": "ollm_gemini._provider",
    "Unexpressible": "ollm_gemini._schema",
    "build_body": "ollm_gemini._convert",
    "contents_of": "ollm_gemini._convert",
    "to_gemini_schema": "ollm_gemini._schema",
    "tools_of": "ollm_gemini._convert",
}

__all__ = [
    "GeminiConfig",
    "GeminiProvider",
    "Unexpressible",
    "__version__",
    "build_body",
    "contents_of",
    "to_gemini_schema",
    "tools_of",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
