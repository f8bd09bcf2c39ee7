"""ollm_llamacpp: a GGUF model inside the process, through llama.cpp; no server.

``LlamaCppProvider`` loads a ``.gguf`` file with llama-cpp-python in a worker thread,
keeps it loaded between chats, streams each reply from a thread of its own and stops
between two tokens when a chat is aborted. It prompts a model through its own chat
template, or a plain ``User:`` / ``Assistant:`` transcript when it has none; counts
tokens exactly with the model's tokenizer; lists the models of a folder
(``models_folder()``) from their GGUF headers (``read_gguf``, ``GGUFInfo``), and
embeds with embedding models. Installing the package registers it as the ``llamacpp``
provider. Names load on first use: discovering the plugin imports neither llama.cpp
nor numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.kit import lazy_exports
from ollm_llamacpp._version import __version__

if TYPE_CHECKING:
    from ollm_llamacpp._config import LlamaCppConfig, models_folder
    from ollm_llamacpp._errors import LlamaCppErrorCode
    from ollm_llamacpp._format import TRANSCRIPT_STOPS
    from ollm_llamacpp._gguf import GGUFError, GGUFInfo, read_gguf
    from ollm_llamacpp._provider import LlamaCppProvider

_LAZY: dict[str, str] = {
    "GGUFError": "ollm_llamacpp._gguf",
    "GGUFInfo": "ollm_llamacpp._gguf",
    "LlamaCppConfig": "ollm_llamacpp._config",
    "LlamaCppErrorCode": "ollm_llamacpp._errors",
    "LlamaCppProvider": "ollm_llamacpp._provider",
    "TRANSCRIPT_STOPS": "ollm_llamacpp._format",
    "models_folder": "ollm_llamacpp._config",
    "read_gguf": "ollm_llamacpp._gguf",
}

__all__ = [
    "TRANSCRIPT_STOPS",
    "GGUFError",
    "GGUFInfo",
    "LlamaCppConfig",
    "LlamaCppErrorCode",
    "LlamaCppProvider",
    "__version__",
    "models_folder",
    "read_gguf",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
