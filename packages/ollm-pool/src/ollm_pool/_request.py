"""One request's way through a pool: which member, failover before the reply starts, one
retry budget, the waits (what it says of them is in ``_words``).

Internal: the body of ``PoolProvider.chat_stream``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

import anyio
import msgspec

from ollm.errors import ErrorCode
from ollm.types import (
    AbortSignal,
    ErrorEvent,
    FinishEvent,
    NoticeEvent,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
    Usage,
)
from ollm_pool import _words as words
from ollm_pool._breaker import Clock
from ollm_pool._choice import Candidate, best
from ollm_pool._failover import USES_BUDGET, Kind, kind_of
from ollm_pool._member import MemberState

if TYPE_CHECKING:
    from ollm_pool._provider import PoolProvider

__all__ = ["PoolRequest"]

_CONTENT = (TextEvent, ThinkingEvent, ToolCallEvent)


class PoolRequest:
    """The state of one request: its attempts, the failures met, where it may still go."""

    def __init__(self, pool: PoolProvider, request: ProviderRequest) -> None:
        self.pool = pool
        self.request = request
        self.abort = request.abort if request.abort is not None else AbortSignal()
        self.key = request.conversation_id or _opening(request)
        self.started = pool.clock.now()
        self.attempts = 0  # requests sent to members
        self.spent = 0  # failures that use the retry budget
        self.failures: dict[int, ErrorEvent] = {}  # each member's last failure
        self.last: tuple[MemberState, ErrorEvent] | None = None  # for the failover notice
        self.stopped: str | None = None  # why no member may be tried any more
        fallbacks = [m for m in pool.model_fallbacks if m != request.model]
        self.models = [request.model, *fallbacks]
        self.model = request.model
        self.final = True  # trying the last model: members that failed may be tried again
        self.excluded: set[int] = set()  # refused this model: never again for it
        self.tried: set[int] = set()  # failed for this model
        self.allowed: set[int] | None = None  # only these (a larger window, tools)
        self.why_not: dict[int, str] = {}  # why a member was left out, for the message

    # -- the stream ------------------------------------------------------------------

    async def events(self) -> AsyncGenerator[ProviderEvent, None]:
        """The events of the reply, from the first member that gives one.

        One generator for the whole way, so that a chunk passes through one layer only:
        before the reply starts, a failure sends the request on to another member; once
        it started, the member's events pass as they are, and a failure ends the reply.
        """
        for number, model in enumerate(self.models):
            self.begin(model, last=number == len(self.models) - 1)
            request = (
                self.request
                if model == self.request.model
                else msgspec.structs.replace(self.request, model=model)
            )
            while True:
                chosen = self.choose_now()
                if chosen is _LATER:  # a wait (a reading of the members, a rest): abortable
                    resting = self.resting()
                    if resting is not None:
                        yield resting
                    with self.abort.guard() as scope:
                        chosen = await self.choose()
                    if scope.cancelled_caught:
                        chosen = None
                if self.abort.aborted:
                    yield self.finished(FinishEvent("cancelled"))
                    return
                if chosen is None:
                    break
                assert not isinstance(chosen, _Later)
                state, probe = chosen
                if self.last is not None:
                    yield self.notice(state)
                self.attempts += 1
                state.attempts += 1
                state.in_flight += 1
                iterator = state.provider.chat_stream(request).__aiter__()
                error: ErrorEvent | None = None
                started = False
                try:
                    try:
                        while True:  # before the reply starts: a failure goes elsewhere
                            try:
                                event = await iterator.__anext__()
                            except StopAsyncIteration:
                                error = words.ended(state)
                                break
                            kind = type(event)
                            if kind is ErrorEvent:
                                error = event  # type: ignore[assignment]
                                break
                            if kind is FinishEvent or kind in _CONTENT:
                                self.answered(state, model)
                                if kind is FinishEvent:
                                    yield self.finished(event)  # type: ignore[arg-type]
                                    return
                                started = True
                                yield event
                                break
                            yield event  # a notice (loading the model...)
                        if started:
                            # The reply started: from here on it is this member's or none.
                            async for event in iterator:
                                kind = type(event)
                                if kind is TextEvent:
                                    yield event
                                elif kind is FinishEvent:
                                    yield self.finished(event)  # type: ignore[arg-type]
                                    return
                                elif kind is ErrorEvent:
                                    yield self.broke_off(state, event)  # type: ignore[arg-type]
                                    return
                                else:
                                    yield event
                            yield self.broke_off(state, words.ended(state))
                            return
                    except Exception as exc:  # a provider that raised (it should not)
                        error = ErrorEvent(
                            f"{state.name} failed: {type(exc).__name__}: {exc}",
                            ErrorCode.PROVIDER_ERROR,
                        )
                        if started:
                            yield self.broke_off(state, error)
                            return
                finally:
                    state.in_flight -= 1
                    state.release(probe)
                    await _close(iterator)
                assert error is not None
                await self.failed(state, probe, error, model)
                if _aborted(self.abort):
                    yield self.finished(FinishEvent("cancelled"))
                    return
                if self.stopped == _FINAL:
                    yield error
                    return
            if self.stopped is not None:
                break
        yield words.no_member(self)

    def answered(self, state: MemberState, model: str) -> None:
        """The member's reply began: it is reachable, has the model loaded, and serves
        the conversation."""
        state.reached()
        state.loads(model)
        self.pool.served(self.request, state)

    # -- choosing a member ---------------------------------------------------------

    def begin(self, model: str, *, last: bool) -> None:
        """Start on ``model`` (the asked one, then each fallback)."""
        self.model = model
        self.final = last
        self.excluded = set()
        self.tried = set()
        self.allowed = None

    def choose_now(self) -> tuple[MemberState, bool] | _Later | None:
        """``choose`` without waiting, when it need not wait (the usual case: no cancel
        scope, no await); ``_LATER`` when it must."""
        candidates = self.candidates()
        if not candidates:
            return None
        now = self.pool.clock.now()
        if any(s.stale(now, self.pool.running_seconds) for s in candidates):
            return _LATER
        return self.pick(candidates, now) or _LATER

    async def choose(self) -> tuple[MemberState, bool] | None:
        """The member that takes the next attempt, and whether it is its circuit's probe;
        ``None`` when no member is left for this model (or for the request:
        ``self.stopped`` says why). Waits, within the pool's wait limit, when the members
        left are all resting: for the first to be ready, or for the outcome of a probe
        another request has out."""
        pool = self.pool
        clock = pool.clock
        while True:
            candidates = self.candidates()
            if not candidates:
                return None
            await pool.refresh(candidates)
            now = clock.now()
            chosen = self.pick(candidates, now)
            if chosen is not None:
                return chosen
            until = self.wait_until(candidates, now)
            if until is None:
                self.stopped = "no member could take it within the wait limit"
                return None
            await _first_of(clock, until - now, [s for s in candidates if s.breaker.probing])

    def wait_until(self, candidates: list[MemberState], now: float) -> float | None:
        """Until when to wait for one of ``candidates`` (none is ready at ``now``): the
        first to be ready, or the end of the wait limit while a probe is out; ``None``
        when none will be ready within the limit."""
        wake = min(s.ready_at(now) for s in candidates)
        deadline = self.started + self.pool.wait_limit
        if wake <= deadline:
            return wake
        if now < deadline and any(s.breaker.probing for s in candidates):
            return deadline
        return None

    def resting(self) -> NoticeEvent | None:
        """The notice that the request waits, when every member it may go to is resting."""
        candidates = self.candidates()
        now = self.pool.clock.now()
        if not candidates or any(s.ready_at(now) <= now for s in candidates):
            return None  # no wait: none left, or only a reading of the loaded models
        until = self.wait_until(candidates, now)
        if until is None:
            return None
        return words.resting(self, candidates, now, until)

    def candidates(self) -> list[MemberState]:
        """The members the next attempt may go to (resting or not); none when the budget
        is spent, or, before the last model, when each has failed for this one."""
        pool = self.pool
        if self.spent >= pool.attempts:
            self.stopped = f"it used its {pool.attempts} attempts"
            return []
        candidates = [s for s in pool.states if self.may_try(s)]
        if not self.final and not any(s.index not in self.tried for s in candidates):
            return []  # each member failed once for this model: the next model
        return candidates

    def pick(self, candidates: list[MemberState], now: float) -> tuple[MemberState, bool] | None:
        """The best of the candidates ready at ``now`` (``None``: none is ready)."""
        ready = [s for s in candidates if s.ready_at(now) <= now]
        if not ready:
            return None
        if len(ready) > 1:
            ready = [ready[best([self.candidate(s, now) for s in ready], self.key)]]
        return ready[0], ready[0].breaker.take(now)

    def may_try(self, state: MemberState) -> bool:
        return state.index not in self.excluded and (
            self.allowed is None or state.index in self.allowed
        )

    def candidate(self, state: MemberState, now: float) -> Candidate:
        return Candidate(
            name=state.name,
            probe=state.breaker.state(now) == "half-open",
            tried=state.index in self.tried,
            in_flight=state.in_flight,
            parallel=state.member.parallel,
            loaded=state.loaded(self.model),
        )

    # -- after a failure -----------------------------------------------------------

    async def failed(self, state: MemberState, probe: bool, error: ErrorEvent, model: str) -> None:
        """Record a failure before the reply started, and decide where the request goes."""
        pool = self.pool
        now = pool.clock.now()
        kind: Kind = kind_of(error.code)
        self.failures[state.index] = error
        self.last = (state, error)
        if kind == "unreachable":
            state.unreachable(now, error.code, error.message, probe=probe)
        else:
            state.reached()
        if kind in USES_BUDGET:
            self.spent += 1
            self.tried.add(state.index)
            if kind == "rate_limited":
                wait = error.retry_after if error.retry_after is not None else pool.backoff
                state.cooling_until = max(state.cooling_until, now + wait)
            return
        if kind == "final":
            self.stopped = _FINAL
            return
        self.excluded.add(state.index)
        if kind == "context":
            await self.only_larger(state, model)
        elif kind == "tools":
            await self.only_with_tools(model)

    async def only_larger(self, state: MemberState, model: str) -> None:
        """After a context error: only members whose window is known to be larger."""
        window = await state.window(model)
        allowed: set[int] = set()
        for other in self.pool.states:
            if other.index in self.excluded:
                continue
            theirs = await other.window(model)
            if theirs is not None and (window is None or theirs > window):
                allowed.add(other.index)
            else:
                self.why_not[other.index] = (
                    f"its context window is not known to be larger than {window} tokens"
                    if window is not None
                    else "its context window is unknown"
                )
        self.allowed = allowed if self.allowed is None else self.allowed & allowed

    async def only_with_tools(self, model: str) -> None:
        """After a "does not support tools": only members where the model may call them."""
        allowed: set[int] = set()
        for other in self.pool.states:
            if other.index in self.excluded:
                continue
            if await other.takes_tools(model) is False:
                self.why_not[other.index] = f"{model} cannot call tools there"
            else:
                allowed.add(other.index)
        self.allowed = allowed if self.allowed is None else self.allowed & allowed

    # -- events of the pool's own --------------------------------------------------

    def finished(self, event: FinishEvent) -> FinishEvent:
        """The member's finish, with the attempts it took in its usage."""
        usage = event.usage if event.usage is not None else Usage()
        return FinishEvent(event.reason, msgspec.structs.replace(usage, attempts=self.attempts))

    def notice(self, chosen: MemberState) -> NoticeEvent:
        """The ``failover`` notice: which member failed, why, and which one is tried now."""
        assert self.last is not None
        failed, error = self.last
        self.last = None
        return words.failover(failed, error, chosen)

    def broke_off(self, state: MemberState, error: ErrorEvent) -> ErrorEvent:
        """The end of a reply that failed after it started: ``STREAM_INTERRUPTED``, never
        another member's words after it."""
        state.unreachable(self.pool.clock.now(), error.code, error.message, probe=False)
        return words.broke_off(state, error)


# ``stopped`` after a failure that no other member would change.
_FINAL = "final"


class _Later:
    """``choose_now``'s answer when choosing means waiting."""


_LATER = _Later()


async def _first_of(clock: Clock, seconds: float, probed: list[MemberState]) -> None:
    """Wait ``seconds`` on ``clock``, or less: until one of the probes of ``probed`` has
    its outcome."""
    if not probed:
        await clock.sleep(seconds)
        return
    async with anyio.create_task_group() as group:

        async def then_stop(wait: Callable[[], Awaitable[None]]) -> None:
            await wait()
            group.cancel_scope.cancel()

        group.start_soon(then_stop, partial(clock.sleep, seconds))
        for state in probed:
            group.start_soon(then_stop, state.wait_for_verdict)


async def _close(iterator: AsyncIterator[ProviderEvent]) -> None:
    """Close a member's stream, even while the request is being cancelled."""
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()


def _aborted(signal: AbortSignal) -> bool:
    # A call, not an attribute read: type checkers would take it not to have changed.
    return signal.aborted


def _opening(request: ProviderRequest) -> str:
    """A request without a conversation id is known by how it begins."""
    first = request.messages[0].text if request.messages else ""
    return f"{request.system_prompt or ''}\0{first}"
