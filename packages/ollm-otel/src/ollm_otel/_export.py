"""The OpenTelemetry SDK set up from the standard ``OTEL_*`` variables, flushed at exit
within a bound.

What ``ollm chat --trace`` and ``OTEL_EXPORTER_OTLP_ENDPOINT`` use when no application
set up OpenTelemetry itself: a ``TracerProvider`` and a ``MeterProvider`` whose exporters
``OTEL_TRACES_EXPORTER`` and ``OTEL_METRICS_EXPORTER`` name (``otlp`` by default, the
OTLP/HTTP exporter reading ``OTEL_EXPORTER_OTLP_ENDPOINT`` and its siblings; ``console``
to write them on stderr; ``none`` for nothing). ``otlp`` with no endpoint variable set
exports nowhere, with one warning saying how to choose one: never to the SDK's default
``localhost:4318``, an address the user did not name. Spans leave in a background thread
(a batch), so an exporter that fails or hangs never slows a chat; at exit the batch is
flushed for at most ``FLUSH_TIMEOUT`` seconds (``OLLM_OTEL_FLUSH_TIMEOUT``), never longer.

Needs ``pip install 'ollm-otel[export]'`` (the SDK and the OTLP exporter).

Internal: the public names are re-exported by ``ollm_otel``.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["ENV_FLUSH_TIMEOUT", "FLUSH_TIMEOUT", "Exporting", "configure"]

log = logging.getLogger("ollm_otel")

FLUSH_TIMEOUT = 2.0
"""Seconds the flush at exit may take, at most."""
ENV_FLUSH_TIMEOUT = "OLLM_OTEL_FLUSH_TIMEOUT"

_INSTALL = "Install them with: pip install 'ollm-otel[export]'"


class Exporting:
    """The SDK providers ``configure`` built, and their bounded shutdown."""

    def __init__(
        self, tracer_provider: TracerProvider, meter_provider: MeterProvider, timeout: float
    ) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.timeout = timeout
        self._done: threading.Event | None = None

    def shutdown(self, timeout: float | None = None) -> bool:
        """Flush and close the exporters, waiting ``timeout`` seconds at most (the
        configured bound by default): whether they finished in time. An exporter that
        hangs is left to its daemon thread, which the process does not wait for."""
        if self._done is None:
            done = self._done = threading.Event()

            def close() -> None:
                try:
                    self.tracer_provider.shutdown()
                    self.meter_provider.shutdown()
                except Exception:
                    log.warning("closing the OpenTelemetry exporters failed", exc_info=True)
                finally:
                    done.set()

            threading.Thread(target=close, name="ollm-otel-shutdown", daemon=True).start()
        return self._done.wait(self.timeout if timeout is None else timeout)


def configure(
    environ: Mapping[str, str] | None = None,
    *,
    span_exporter: SpanExporter | None = None,
    metric_exporter: MetricExporter | None = None,
    install: bool = True,
) -> Exporting:
    """The SDK's providers, their exporters from the ``OTEL_*`` variables of ``environ``
    (``os.environ`` by default) unless given; with ``install``, made the global ones and
    flushed at exit within the bound."""
    env = os.environ if environ is None else environ
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise RuntimeError(
            f"sending traces needs the OpenTelemetry SDK and OTLP exporter. {_INSTALL}"
        ) from None
    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "ollm"})
    # The SDK's own exit handlers wait for a hanging exporter without a bound: ours does.
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    unnamed: list[str] = []  # what otlp would send to an address nobody named
    spans = (
        span_exporter
        if span_exporter is not None
        else _exporter(env, "OTEL_TRACES_EXPORTER", unnamed)
    )
    if spans is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(spans))
    metrics = (
        metric_exporter
        if metric_exporter is not None
        else _exporter(env, "OTEL_METRICS_EXPORTER", unnamed)
    )
    # One line, when the traces (what --trace is for) have nowhere to go; metrics
    # without an endpoint beside traces that do (on the console) are quietly off.
    if "traces" in unnamed:
        log.warning(
            "%s go nowhere: no OTEL_EXPORTER_OTLP_ENDPOINT is set. Set it to your "
            "collector's address (such as http://localhost:4318), or set "
            "OTEL_TRACES_EXPORTER=console to see the spans on stderr",
            " and ".join(unnamed).capitalize(),
        )
    readers = [PeriodicExportingMetricReader(metrics)] if metrics is not None else []
    meter_provider = MeterProvider(
        resource=resource, metric_readers=readers, shutdown_on_exit=False
    )
    exporting = Exporting(tracer_provider, meter_provider, _flush_timeout(env))
    if install:
        from opentelemetry import metrics as metrics_api
        from opentelemetry import trace

        trace.set_tracer_provider(tracer_provider)
        metrics_api.set_meter_provider(meter_provider)
        atexit.register(exporting.shutdown)
    return exporting


def _choice(env: Mapping[str, str], name: str) -> str:
    value = (env.get(name) or "otlp").strip().lower()
    if value not in ("otlp", "console", "none"):
        raise ValueError(
            f"{name}={value!r} is not an exporter ollm-otel sets up: use otlp, console or "
            "none (or set up OpenTelemetry in your application and name the middleware there)"
        )
    return value


# What each variable's ``otlp`` is: the module and class of its exporter, what it sends,
# and the variable naming its own endpoint (besides OTEL_EXPORTER_OTLP_ENDPOINT).
_OTLP = {
    "OTEL_TRACES_EXPORTER": (
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "OTLPSpanExporter",
        "traces",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ),
    "OTEL_METRICS_EXPORTER": (
        "opentelemetry.exporter.otlp.proto.http.metric_exporter",
        "OTLPMetricExporter",
        "metrics",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    ),
}
# And its ``console``: the SDK's exporter that writes each batch as JSON.
_CONSOLE = {
    "OTEL_TRACES_EXPORTER": ("opentelemetry.sdk.trace.export", "ConsoleSpanExporter"),
    "OTEL_METRICS_EXPORTER": ("opentelemetry.sdk.metrics.export", "ConsoleMetricExporter"),
}


def _exporter(env: Mapping[str, str], variable: str, unnamed: list[str]) -> Any:
    """The exporter ``variable`` names (``None`` for ``none``, and for ``otlp`` without
    an endpoint: then what it sends is added to ``unnamed``)."""
    choice = _choice(env, variable)
    if choice == "none":
        return None
    if choice == "console":
        module, name = _CONSOLE[variable]
        # On stderr: stdout is the reply's (and --json's events').
        return getattr(importlib.import_module(module), name)(out=sys.stderr)
    module, name, sends, own = _OTLP[variable]
    if not any((env.get(v) or "").strip() for v in ("OTEL_EXPORTER_OTLP_ENDPOINT", own)):
        unnamed.append(sends)
        return None
    try:
        exporter = getattr(importlib.import_module(module), name)
    except ImportError:
        raise RuntimeError(f"sending {sends} needs the OTLP exporter. {_INSTALL}") from None
    return exporter()


def _flush_timeout(env: Mapping[str, str]) -> float:
    given = env.get(ENV_FLUSH_TIMEOUT, "").strip()
    if not given:
        return FLUSH_TIMEOUT
    try:
        value = float(given)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError(
            f"{ENV_FLUSH_TIMEOUT}={given!r} is not a number of seconds: set it to one, "
            f"such as {FLUSH_TIMEOUT:g}, or unset it"
        )
    return value
