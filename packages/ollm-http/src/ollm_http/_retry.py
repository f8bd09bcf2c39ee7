"""Waiting and trying again when a server says "not now" (429, 503 with Retry-After)."""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import anyio

from ollm.errors import RateLimitedError

__all__ = ["NO_RETRY", "RetryPolicy", "retry_after_seconds", "with_retries"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to wait before giving up with ``RATE_LIMITED``.

    ``attempts`` counts the first try. A wait is the server's ``Retry-After`` when it
    says one (capped at ``max_wait``; longer than that, ollm gives up at once rather
    than hang), else ``backoff * 2**n`` seconds.
    """

    attempts: int = 3
    backoff: float = 1.0
    max_wait: float = 30.0


NO_RETRY = RetryPolicy(attempts=1)


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
