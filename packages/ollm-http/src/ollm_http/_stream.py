"""Reading a streamed reply on the hot path, stopping it at once, and ending it cleanly;
the end of a stream that failed, and a provider's health check.

A provider's chat stream reads the transport's own byte stream (no httpx layer on top;
``body_reader`` decodes a compressed one in bounded pieces),
lets an abort signal shut the socket (one callback per stream instead of a cancel scope
per read, which costs more than decoding a line), reads the few bytes after the last
event so the connection goes back to the pool, and closes the reply even while its task
is being cancelled. Ollama's NDJSON stream and the OpenAI-compatible SSE stream share
these.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import anyio
import httpx

from ollm.errors import ErrorCode, OllmError, RateLimitedError
from ollm.types import AbortSignal, ErrorEvent, FinishEvent, HealthStatus, ProviderEvent
from ollm_http._body import BodyRead, body_reader

__all__ = [
    "BodyRead",
    "abort_shuts_socket",
    "body_reader",
    "check_health",
    "close_response",
    "drain",
    "failure_event",
]

log = logging.getLogger("ollm_http")

# How long to wait for the body's end after the last event (it normally comes at once).
DRAIN_SECONDS = 0.5


def abort_shuts_socket(response: httpx.Response, abort: AbortSignal) -> Callable[[], None] | None:
    """Make ``abort`` shut the response's socket, so a pending read ends at once.

    Returns the function that removes the callback, or ``None`` when the transport has
    no socket (an injected one): then the caller guards each read instead.
    """
    network = response.extensions.get("network_stream")
    get_extra_info = getattr(network, "get_extra_info", None)
    if get_extra_info is None:
        return None
    try:
        sock = get_extra_info("socket")
    except Exception:
        return None
    shutdown = getattr(sock, "shutdown", None)
    if shutdown is None:
        return None

    def shut() -> None:
        # Thread-safe: the pending read sees the end of the stream, the server a close.
        with contextlib.suppress(OSError):
            shutdown(socket.SHUT_RDWR)

    return abort.on_abort(shut)


async def drain(reads: BodyRead, seconds: float = DRAIN_SECONDS) -> None:
    """Read the few bytes after the last event (the body's end), so the connection is reused.

    A reply ends with its last event and then the body's own end; stopping at the event
    would leave the connection unfinished, and it could not serve the next request.
    Bounded, and shielded: it runs while the stream is being closed.
    """
    with anyio.CancelScope(shield=True), anyio.move_on_after(seconds):
        try:
            while True:
                await reads()
        except StopAsyncIteration:
            return
        except Exception:
            log.debug("the end of a finished reply could not be read", exc_info=True)


async def close_response(response: httpx.Response) -> None:
    """Close ``response`` even while the task is being cancelled: the server must see it."""
    with anyio.CancelScope(shield=True):
        try:
            await response.aclose()
        except Exception:
            log.debug("closing a response failed", exc_info=True)


def failure_event(
    exc: Exception,
    abort: AbortSignal,
    *,
    connection_error: Callable[[BaseException], OllmError],
    reading: str,
    report: str,
    logger: logging.Logger,
) -> ProviderEvent:
    """The event that ends a provider's stream which raised ``exc``.

    A cancellation when the abort fired (its shut socket is what made the read fail);
    else the ``OllmError`` itself (a rate limit's ``retry_after`` kept), httpx's failure
    mapped by ``connection_error``, or
    for anything else a ``PROVIDER_ERROR`` saying ``reading`` failed, logged with its
    traceback, and asking to ``report`` it. Call it from the ``except`` block.
    """
    if abort.aborted:
        return FinishEvent("cancelled")
    if isinstance(exc, OllmError):
        error = exc
    elif isinstance(exc, httpx.HTTPError):
        error = connection_error(exc)
    else:
        logger.exception("%s failed unexpectedly", reading)
        return ErrorEvent(
            f"{reading} failed: {type(exc).__name__}: {exc}. Please report this with {report}.",
            ErrorCode.PROVIDER_ERROR,
        )
    if isinstance(error, RateLimitedError) and error.retry_after is not None:
        return ErrorEvent(error.message, error.code, retry_after=error.retry_after)
    return ErrorEvent(error.message, error.code)


async def check_health(
    provider: str, probe: Callable[[], Awaitable[str | None]], checking: str
) -> HealthStatus:
    """A provider's ``health()``: run ``probe`` (it returns the server's version, if any).

    Never raises: a failure is a status with ``ok=False``, its code and message;
    ``checking`` names what was checked for an unexpected failure ("Ollama at URL").
    """
    checked_at = datetime.now(UTC)
    started = time.perf_counter()
    try:
        version = await probe()
    except OllmError as exc:
        return HealthStatus(
            ok=False,
            provider=provider,
            checked_at=checked_at,
            error=exc.message,
            error_code=exc.code,
        )
    except Exception as exc:
        return HealthStatus(
            ok=False,
            provider=provider,
            checked_at=checked_at,
            error=f"Checking {checking} failed: {type(exc).__name__}: {exc}",
            error_code=ErrorCode.PROVIDER_ERROR,
        )
    return HealthStatus(
        ok=True,
        provider=provider,
        checked_at=checked_at,
        latency_ms=(time.perf_counter() - started) * 1000.0,
        version=version or None,
    )
