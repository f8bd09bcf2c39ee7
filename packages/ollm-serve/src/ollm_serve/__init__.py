"""``ollm serve``: any ollm provider behind OpenAI's and Ollama's HTTP APIs.

- ``create_app(providers, ...)``: the ASGI application (serve it with uvicorn, or call it
  in-process with httpx's ``ASGITransport``);
- ``running(app)``: the app on uvicorn in a thread of this process, yielding its URL;
- ``ServeSettings``: keys, CORS, limits; ``ServeApp`` and ``Backend``: what it is made of.

The ``ollm serve`` command runs it on uvicorn, bound to 127.0.0.1 unless told otherwise
with keys. Names load on first use: discovery, which imports this package's plugin
module at every ``ollm`` start, imports nothing of the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.kit import lazy_exports
from ollm_serve._version import __version__

if TYPE_CHECKING:
    from ollm_serve._app import ServeApp, ServeSettings, create_app
    from ollm_serve._backend import Backend
    from ollm_serve._running import running

__all__ = ["Backend", "ServeApp", "ServeSettings", "__version__", "create_app", "running"]

_LAZY: dict[str, str] = {
    "Backend": "ollm_serve._backend",
    "ServeApp": "ollm_serve._app",
    "ServeSettings": "ollm_serve._app",
    "create_app": "ollm_serve._app",
    "running": "ollm_serve._running",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
