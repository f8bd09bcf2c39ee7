"""The plugin that adds ``ollm serve`` (hook ``ollm_commands``).

Discovery imports this module at start-up, so it imports nothing: uvicorn and the app
load when ``ollm serve`` runs.
"""

from __future__ import annotations

from typing import Any

from ollm.hookspecs import hookimpl
from ollm.types import CommandSpec

__all__ = ["ollm_commands"]


def _configure(parser: Any) -> None:
    from ollm_serve._command import configure

    configure(parser)


def _run(args: Any) -> int:
    from ollm_serve._command import run

    return run(args)


@hookimpl
def ollm_commands() -> list[CommandSpec]:
    """``serve``."""
    return [
        CommandSpec(
            "serve",
            "serve any provider over OpenAI's and Ollama's HTTP APIs",
            _configure,
            _run,
            "Serve the providers over OpenAI-compatible (/v1/chat/completions, /v1/models, "
            "/v1/embeddings) and Ollama-compatible (/api/chat, /api/tags, /api/show, "
            "/api/embed, /api/version) endpoints, with ollm's tool-call recovery and typed "
            "output. Binds 127.0.0.1; another address needs API keys.",
        )
    ]
