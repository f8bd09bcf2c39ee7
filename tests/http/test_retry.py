"""RetryPolicy: waiting as a rate-limiting server asks, then RATE_LIMITED."""

from __future__ import annotations

import email.utils

import pytest

import ollm
from ollm_http import NO_RETRY, RetryPolicy, retry_after_seconds, with_retries

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("3", 3.0), ("0.5", 0.5), ("-4", 0.0), ("soon", None), ("", None), ("inf", None)],
)
def test_retry_after_as_seconds(value: str, seconds: float | None) -> None:
    assert retry_after_seconds({"retry-after": value}) == seconds


def test_retry_after_as_an_http_date() -> None:
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert retry_after_seconds({"Retry-After": date}, now=1_000_000) == 30.0
    assert retry_after_seconds({}) is None


async def test_a_rate_limited_attempt_is_tried_again_then_succeeds() -> None:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ollm.RateLimitedError("slow down", retry_after=0.0)
        return "done"

    assert await with_retries(RetryPolicy(attempts=3, backoff=0.0), attempt) == "done"
    assert len(calls) == 3


async def test_the_last_refusal_is_raised_when_attempts_run_out_or_the_wait_is_too_long() -> None:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        raise ollm.RateLimitedError("slow down", retry_after=0.0)

    with pytest.raises(ollm.RateLimitedError) as caught:
        await with_retries(RetryPolicy(attempts=2, backoff=0.0), attempt)
    assert caught.value.code == "RATE_LIMITED"
    assert len(calls) == 2

    async def patient() -> str:
        calls.append(1)
        raise ollm.RateLimitedError("come back in an hour", retry_after=3600)

    calls.clear()
    with pytest.raises(ollm.RateLimitedError, match="an hour"):
        await with_retries(RetryPolicy(attempts=5, max_wait=30), patient)
    assert len(calls) == 1
    calls.clear()
    with pytest.raises(ollm.RateLimitedError):
        await with_retries(NO_RETRY, attempt)
    assert len(calls) == 1


async def test_other_errors_are_never_retried() -> None:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        raise ollm.ConnectionFailedError("down")

    with pytest.raises(ollm.ConnectionFailedError):
        await with_retries(RetryPolicy(attempts=5, backoff=0.0), attempt)
    assert len(calls) == 1


async def test_without_retry_after_the_waits_double_from_the_backoff() -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    async def attempt() -> str:
        raise ollm.RateLimitedError("slow down")

    policy = RetryPolicy(attempts=4, backoff=1.5, max_wait=30)
    with pytest.raises(ollm.RateLimitedError):
        await with_retries(policy, attempt, sleep=record)
    assert waits == [1.5, 3.0, 6.0]


async def test_a_wait_of_exactly_max_wait_is_waited() -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ollm.RateLimitedError("slow down", retry_after=30)
        return "done"

    assert await with_retries(RetryPolicy(attempts=2, max_wait=30), attempt, sleep=record) == "done"
    assert waits == [30]


def test_retry_after_as_a_date_is_counted_from_now() -> None:
    import time

    date = email.utils.formatdate(time.time() + 120, usegmt=True)
    seconds = retry_after_seconds({"Retry-After": date})
    assert seconds is not None
    assert 100 < seconds <= 120  # the date's whole seconds, counted from the clock
