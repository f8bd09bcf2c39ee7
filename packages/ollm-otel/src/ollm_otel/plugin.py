"""The plugin that offers the ``otel`` middleware.

Discovery imports this module at every start, so it imports nothing: OpenTelemetry is
imported by the factory, when a chat names ``otel`` (``--middleware otel``, ``--trace``,
``OLLM_MIDDLEWARE=otel``, ``ChatClient(middleware=["otel"])``).
"""

from __future__ import annotations

from ollm.hookspecs import hookimpl
from ollm.types import MiddlewareSpec

__all__ = ["ollm_middleware"]


def _otel() -> object:
    from ollm_otel._middleware import Otel

    return Otel.from_env()


@hookimpl
def ollm_middleware() -> list[MiddlewareSpec]:
    """``otel``."""
    return [
        MiddlewareSpec(
            "otel",
            _otel,
            "OpenTelemetry GenAI traces and metrics of each chat, request and tool call "
            "(sent where the OTEL_* variables say)",
        )
    ]
