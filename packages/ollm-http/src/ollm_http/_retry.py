"""Waiting and trying again when a server says "not now" (429, 503) or fails for a moment.

One policy for every provider (``ollm_http.HTTPProvider`` applies it before a reply's
body starts; nothing is ever tried again once part of a reply was given out):

- a rate limit (the provider's ``error_for`` gave ``RateLimitedError``: HTTP 429, or 503
  with ``Retry-After``) waits what the server asked (``Retry-After``, Google's
  ``RetryInfo``), else ``backoff * 2**n``; a wait longer than ``max_wait`` gives up at
  once with ``RATE_LIMITED`` rather than hang;
- a transient failure (a status in ``statuses``: 500, 502, 503, 504, that the provider
  mapped to ``PROVIDER_ERROR`` or ``TIMEOUT``) waits ``backoff * 2**n``, or the
  ``Retry-After`` the server sent;
- anything else (a bad key, a missing model, a refused option) fails at once.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import anyio

from ollm.errors import ErrorCode, OllmError, RateLimitedError

__all__ = [
    "DEFAULT_RETRY",
    "NO_RETRY",
    "RetryPolicy",
    "is_rate_limited",
    "retry_after_seconds",
    "with_retries",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to wait before giving up (see the module's rules).

    ``attempts`` counts the first try. A wait is the server's ``Retry-After`` when it
    says one (longer than ``max_wait``, ollm gives up at once rather than hang), else
    ``backoff * 2**n`` seconds. ``statuses`` are the HTTP statuses of transient
    failures tried again like rate limits.
    """

    attempts: int = 3
    backoff: float = 1.0
    max_wait: float = 30.0
    statuses: frozenset[int] = frozenset({500, 502, 503, 504})

    def wait(self, error: OllmError, status: int | None, number: int) -> float | None:
        """Seconds to wait before trying again after ``error`` (a reply of ``status``) on
        try ``number`` (0 for the first), or ``None`` to give up and raise it."""
        if number + 1 >= max(self.attempts, 1):
            return None
        if isinstance(error, RateLimitedError):
            wait = error.retry_after
        elif status in self.statuses and error.code in _TRANSIENT:
            wait = None
        else:
            return None
        if wait is None:
            wait = self.backoff * (2**number)
        return wait if wait <= self.max_wait else None


_TRANSIENT = frozenset({ErrorCode.PROVIDER_ERROR, ErrorCode.TIMEOUT})

DEFAULT_RETRY = RetryPolicy()
"""Three tries, waits of 1 s and 2 s (or what the server asks, up to 30 s)."""

NO_RETRY = RetryPolicy(attempts=1)
"""One try: every failure is raised at once."""


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds (a number or an HTTP date)."""
    value = headers.get("retry-after") or headers.get("Retry-After")
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)


def is_rate_limited(status: int | None, headers: Mapping[str, str] | None) -> bool:
    """Whether a reply says "not now": HTTP 429, or 503 with ``Retry-After``.

    Every provider maps such a reply to ``RateLimitedError`` (``RATE_LIMITED``), which
    the policy waits for; a 503 without ``Retry-After`` is a transient failure.
    """
    if status == 429:
        return True
    return status == 503 and headers is not None and retry_after_seconds(headers) is not None


async def with_retries(
    policy: RetryPolicy,
    attempt: Callable[[], Awaitable[T]],
    *,
    sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
) -> T:
    """Run ``attempt``; on ``RateLimitedError``, wait as the server asked and try again.

    The last ``RateLimitedError`` is raised when the attempts run out or the server
    asks for a wait longer than ``policy.max_wait``. ``sleep`` does the waiting (a
    test, or a program with a clock of its own, passes another).
    """
    tries = max(policy.attempts, 1)
    for number in range(tries):
        try:
            return await attempt()
        except RateLimitedError as exc:
            wait = exc.retry_after
            if wait is None:
                wait = policy.backoff * (2**number)
            if number + 1 >= tries or wait > policy.max_wait:
                raise
            await sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover
