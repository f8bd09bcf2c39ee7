"""ollm-otel: OpenTelemetry GenAI traces and metrics for ollm, off until asked for.

A middleware named ``otel``: each chat becomes an ``invoke_agent`` span, each request to
the model a ``chat {model}`` span and each tool call an ``execute_tool {name}`` span, in
the OpenTelemetry GenAI semantic conventions (``SEMCONV_VERSION``), with the client
metrics of those conventions. It runs only when named: ``ollm chat --trace`` (or
``--middleware otel``, ``OLLM_MIDDLEWARE=otel``, ``OTEL_EXPORTER_OTLP_ENDPOINT`` set),
or in Python ``ChatClient(middleware=[Otel()])``.

- ``Otel``: the middleware (on the global OpenTelemetry providers, or those given);
- ``configure``: the SDK set up from the ``OTEL_*`` variables, with ``Exporting.shutdown``
  flushing it within a bound (needs ``ollm-otel[export]``);
- ``CAPTURE_CONTENT_ENV``: messages are recorded only when it is ``true``.

Names load on first use: importing this package imports no OpenTelemetry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.kit import lazy_exports
from ollm_otel._version import __version__

if TYPE_CHECKING:
    from ollm_otel._export import FLUSH_TIMEOUT, Exporting, configure
    from ollm_otel._middleware import CAPTURE_CONTENT_ENV, CONTENT_LIMIT, Otel
    from ollm_otel._names import SCHEMA_URL, SEMCONV_VERSION

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "CONTENT_LIMIT",
    "FLUSH_TIMEOUT",
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "Exporting",
    "Otel",
    "__version__",
    "configure",
]

_LAZY: dict[str, str] = {
    "CAPTURE_CONTENT_ENV": "ollm_otel._middleware",
    "CONTENT_LIMIT": "ollm_otel._middleware",
    "FLUSH_TIMEOUT": "ollm_otel._export",
    "SCHEMA_URL": "ollm_otel._names",
    "SEMCONV_VERSION": "ollm_otel._names",
    "Exporting": "ollm_otel._export",
    "Otel": "ollm_otel._middleware",
    "configure": "ollm_otel._export",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
