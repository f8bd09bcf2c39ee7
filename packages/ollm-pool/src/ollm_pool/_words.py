"""What a pool tells its user, in words: the notices of a failover and of a wait, and the
errors of a reply that broke off and of a request no member could answer.

Internal: ``PoolRequest`` builds its events with these.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ollm.errors import ErrorCode
from ollm.kit import quote
from ollm.types import ErrorEvent, NoticeEvent

if TYPE_CHECKING:
    from ollm_pool._member import MemberState
    from ollm_pool._request import PoolRequest

__all__ = ["broke_off", "ended", "failover", "first_sentence", "no_member", "resting"]


def failover(failed: MemberState, error: ErrorEvent, chosen: MemberState) -> NoticeEvent:
    """The ``failover`` notice: which member failed, why, and which one is tried now."""
    return NoticeEvent(
        f"{failed.name} failed ({error.code}: {first_sentence(error.message)}); "
        f"trying {chosen.name}.",
        "failover",
    )


def resting(
    request: PoolRequest, candidates: list[MemberState], now: float, until: float
) -> NoticeEvent:
    """The ``retry`` notice of a request that waits until ``until``: why each member rests."""
    why = "; ".join(f"{s.name}: {why_untried(request, s, now)}" for s in candidates)
    return NoticeEvent(
        f"No member of the pool {request.pool.name!r} can take the request now ({why}); "
        f"it waits up to {math.ceil(until - now)} s for the first to be ready.",
        "retry",
    )


def broke_off(state: MemberState, error: ErrorEvent) -> ErrorEvent:
    """The error of a reply that failed after it started: ``STREAM_INTERRUPTED``."""
    return ErrorEvent(
        f"The reply from {state.name} broke off after it had started ({quote(error.message)}). "
        "What it said is kept; the pool does not join another server's words to it. "
        "Ask again to go on.",
        ErrorCode.STREAM_INTERRUPTED,
    )


def ended(state: MemberState) -> ErrorEvent:
    """The error of a member's reply that ended without its finish."""
    return ErrorEvent(
        f"{state.name} ended its reply without saying it was done.", ErrorCode.STREAM_INTERRUPTED
    )


def no_member(request: PoolRequest) -> ErrorEvent:
    """The error when no member could answer: each member, and why."""
    pool = request.pool
    now = pool.clock.now()
    parts = []
    for state in pool.states:
        failure = request.failures.get(state.index)
        if failure is not None:
            parts.append(f"{state.name}: {first_sentence(failure.message)}")
        else:
            parts.append(f"{state.name}: not tried ({why_untried(request, state, now)})")
    codes = [f.code for f in request.failures.values()]
    if ErrorCode.TOOLS_UNSUPPORTED in codes:
        code = ErrorCode.TOOLS_UNSUPPORTED  # so that the runtime may fall back to ReAct
    elif codes:
        code = request.last[1].code if request.last is not None else codes[-1]
    else:
        code = ErrorCode.CONNECTION_FAILED
    models = " or ".join(repr(m) for m in request.models)
    attempts = request.attempts
    tries = f" ({attempts} attempt{'s' if attempts != 1 else ''})" if attempts else ""
    return ErrorEvent(
        f"No member of the pool {pool.name!r} could answer for {models}{tries}: "
        + "; ".join(parts)
        + ". Check those servers, or try again in a moment.",
        code,
    )


def why_untried(request: PoolRequest, state: MemberState, now: float) -> str:
    """Why ``request`` did not try ``state``'s member (yet), in words."""
    if state.index in request.why_not:
        return request.why_not[state.index]
    if state.breaker.probing:
        return "another request was finding out whether it is back"
    if state.breaker.state(now) == "open" and state.breaker.open_until is not None:
        wait = state.breaker.open_until - now
        said = f" ({first_sentence(state.trouble)})" if state.trouble else ""
        return f"it could not be reached{said}, and is left alone for {wait:.0f} s more"
    if state.cooling_until > now:
        return f"it asked to wait {state.cooling_until - now:.0f} s more"
    return request.stopped or "another member answered first"


def first_sentence(message: str, limit: int = 160) -> str:
    """The first sentence of a member's message (what failed; the rest is advice), cut at
    ``limit`` characters, for a notice or a list of members."""
    depth = 0
    for position, char in enumerate(message):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(0, depth - 1)
        elif char == "." and depth == 0 and message[position + 1 : position + 2] in (" ", ""):
            return quote(message[:position], limit)
    return quote(message, limit)
