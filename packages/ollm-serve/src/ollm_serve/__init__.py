"""``ollm serve``: any ollm provider behind OpenAI's and Ollama's HTTP APIs.

``create_app(...)`` builds the ASGI application (serve it with uvicorn, or call it
in-process with httpx's ``ASGITransport``); the ``ollm serve`` command runs it on
uvicorn, bound to 127.0.0.1 unless told otherwise with keys.
"""

from __future__ import annotations

from collections.abc import Sequence

import ollm
from ollm_serve._app import ServeApp, ServeSettings
from ollm_serve._backend import Backend
from ollm_serve._running import running
from ollm_serve._version import __version__

__all__ = ["Backend", "ServeApp", "ServeSettings", "__version__", "create_app", "running"]


def create_app(
    providers: Sequence[str] = (),
    *,
    model: str | None = None,
    registries: ollm.Registries | None = None,
    tool_strategy: str = "auto",
    middleware: Sequence[str] = (),
    settings: ServeSettings | None = None,
) -> ServeApp:
    """The ASGI app serving ``providers`` (names as ``-p`` takes them; none: the default
    provider). ``model`` is the model of a request that names only its provider."""
    backend = Backend(
        providers,
        model=model,
        registries=registries,
        tool_strategy=tool_strategy,
        middleware=middleware,
    )
    return ServeApp(backend, settings)
