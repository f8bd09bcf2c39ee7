"""Configuration of a command: flags, then environment, then defaults, resolved here only."""

from __future__ import annotations

import os
from collections.abc import Container, Mapping
from dataclasses import dataclass
from typing import Any

from ollm.errors import InvalidRequestError
from ollm.plugins import PluginSettings, discover
from ollm.registries import Registries

__all__ = ["TRACE_MIDDLEWARE", "CliConfig", "load_registries", "strategy_names", "with_tracing"]

BACKENDS = ("asyncio", "trio")
# The middleware of ollm-otel, which --trace and the OpenTelemetry variables turn on.
TRACE_MIDDLEWARE = "otel"


@dataclass(frozen=True)
class CliConfig:
    """What every command needs to know."""

    provider: str | None
    model: str | None
    backend: str
    debug: bool
    middleware: tuple[str, ...] = ()
    tool_strategy: str = "auto"

    @classmethod
    def from_args(cls, args: Any, environ: Mapping[str, str] | None = None) -> CliConfig:
        """Flags win over ``OLLM_PROVIDER``, ``OLLM_MODEL``, ``OLLM_BACKEND``,
        ``OLLM_MIDDLEWARE`` (names separated by commas) and ``OLLM_TOOL_STRATEGY``
        (``--react`` is ``--tool-strategy react``)."""
        env = os.environ if environ is None else environ
        backend = getattr(args, "backend", None) or env.get("OLLM_BACKEND") or "asyncio"
        if backend not in BACKENDS:
            raise InvalidRequestError(
                f"OLLM_BACKEND={backend!r} is not a backend: use asyncio or trio."
            )
        return cls(
            provider=getattr(args, "provider", None) or env.get("OLLM_PROVIDER") or None,
            model=getattr(args, "model", None) or env.get("OLLM_MODEL") or None,
            backend=backend,
            debug=bool(getattr(args, "debug", False)),
            middleware=tuple(getattr(args, "middleware", None) or ())
            or tuple(n.strip() for n in env.get("OLLM_MIDDLEWARE", "").split(",") if n.strip()),
            tool_strategy=(getattr(args, "tool_strategy", None) or "").strip()
            or ("react" if getattr(args, "react", False) else None)
            or env.get("OLLM_TOOL_STRATEGY", "").strip()
            or "auto",
        )


def with_tracing(
    middleware: tuple[str, ...],
    *,
    asked: bool,
    installed: Container[str],
    environ: Mapping[str, str],
) -> tuple[str, ...]:
    """``middleware`` with ``otel`` first (outermost) when traces are asked for: by
    ``--trace``, or by an exporter named in the environment (``OTEL_EXPORTER_OTLP_ENDPOINT``,
    ``OTEL_TRACES_EXPORTER`` other than ``none``) while it is installed."""
    if TRACE_MIDDLEWARE in middleware:
        return middleware
    endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    configured = bool(endpoint) or exporter not in ("", "none")
    if asked or (configured and TRACE_MIDDLEWARE in installed):
        return (TRACE_MIDDLEWARE, *middleware)
    return middleware


def load_registries(*, strict: bool | None = None) -> Registries:
    """Discover plugins with the environment's switches (``strict`` may be overridden)."""
    settings = PluginSettings.from_env(os.environ)
    if strict is not None and strict != settings.strict:
        settings = PluginSettings(
            allow=settings.allow, block=settings.block, autoload=settings.autoload, strict=strict
        )
    return discover(settings=settings)


def strategy_names(registries: Registries) -> list[str]:
    """The names ``--tool-strategy`` takes: the runtime's own (``auto``, ``native``), then
    the installed plugins' strategies."""
    return list(dict.fromkeys(["auto", "native", *registries.strategies.list()]))
