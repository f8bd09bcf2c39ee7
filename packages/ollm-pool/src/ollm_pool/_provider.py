"""``PoolProvider``: several model servers behind one provider."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Self

import anyio

from ollm.errors import ModelNotFoundError, OllmError
from ollm.kit import fallback_count
from ollm.types import (
    Closeable,
    ModelCapabilities,
    ModelInfo,
    ModelListing,
    ProviderAdapter,
    ProviderEvent,
    ProviderRequest,
    TokenCounting,
)
from ollm_pool._breaker import CircuitBreaker, Clock, SystemClock
from ollm_pool._member import Member, MemberState, MemberStatus, unique_names
from ollm_pool._request import PoolRequest

__all__ = ["PoolProvider"]

log = logging.getLogger("ollm_pool")

# How many conversations the pool remembers the member of (for token counts).
_REMEMBERED = 4096


class PoolProvider:
    """Several model servers behind one provider: ``ChatClient(provider=PoolProvider([...]))``.

    Members are other providers' instances (an ``OllamaProvider`` per host, an
    ``OpenAIProvider`` for a vLLM server...), or ``Member``\\s that say more of them
    (``parallel``, ``context_window``, ``name``). Each request goes to one member:

    - for Ollama members, preferably where the model is loaded (``/api/ps``, read again
      every ``running_seconds``), then the one with the fewest requests in flight for its
      ``parallel``, then the conversation's own member (its prompt is in that server's
      cache); see ``ollm_pool._choice``;
    - a member that cannot be reached is left alone (its circuit opens) for ``backoff``
      seconds, doubled for each failure in a row up to ``max_backoff``, then probed by
      one request; when every member is resting, a request waits for the first to be
      ready (or for the outcome of the probe another request has out), up to
      ``wait_limit`` seconds;
    - the pool owns the one retry budget: ``attempts`` failures of servers (unreachable,
      failed, rate-limited) per request across members; the members' own retries are
      turned off (``ollm_http.NO_RETRY``). A server that asks to wait (``Retry-After``)
      rests that long while another member is tried. The attempts a reply took are in
      its finish's ``usage.attempts``;
    - failover happens only before the reply's first text, thinking or tool call, and is
      announced with a ``failover`` notice: a missing model, a server error, a context
      window too small (to a member with a larger one), a model that cannot call tools
      there (to a member where it can, before the runtime falls back to ReAct). Once the
      reply started, a failure ends it ``STREAM_INTERRUPTED``, with what it said kept;
    - ``model_fallbacks`` are tried, in order, after every member failed for the model
      asked for.

    ``clock`` replaces the time the breakers and waits read (a test's). Closing the
    pool closes its members.
    """

    handles_abort = True

    def __init__(
        self,
        members: Sequence[ProviderAdapter | Member],
        *,
        name: str = "pool",
        model: str | None = None,
        model_fallbacks: Sequence[str] = (),
        attempts: int = 3,
        wait_limit: float = 30.0,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        running_seconds: float = 2.0,
        clock: Clock | None = None,
    ) -> None:
        given: object = members
        if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
            raise TypeError("members must be a list of providers (or ollm_pool.Member)")
        if not members:
            raise ValueError("a pool needs at least one member")
        if isinstance(model_fallbacks, (str, bytes)):
            raise TypeError("model_fallbacks must be a list of model names, not one string")
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError("attempts must be a whole number, 1 or more")
        for setting, value in (
            ("wait_limit", wait_limit),
            ("backoff", backoff),
            ("max_backoff", max_backoff),
            ("running_seconds", running_seconds),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{setting} must be a number of seconds, 0 or more")
        described = [m if isinstance(m, Member) else Member(m) for m in members]
        self.members: tuple[Member, ...] = tuple(described)
        self._name = name
        self.model = model
        self.model_fallbacks = tuple(model_fallbacks)
        self.attempts = attempts
        self.wait_limit = float(wait_limit)
        self.backoff = float(backoff)
        self.running_seconds = float(running_seconds)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.states = [
            MemberState(
                member,
                index,
                label,
                CircuitBreaker(backoff=backoff, max_backoff=max_backoff),
                self.clock,
            )
            for index, (member, label) in enumerate(
                zip(described, unique_names(described), strict=True)
            )
        ]
        self.handles_abort = all(getattr(m.provider, "handles_abort", False) for m in described)
        self._served: dict[str, MemberState] = {}
        _members_retry_off(described)

    @property
    def name(self) -> str:
        """``pool``, or ``pool:NAME`` for a pool of the pools file."""
        return self._name

    @property
    def default_model(self) -> str | None:
        """The pool's ``model``, else the first member's default model."""
        if self.model:
            return self.model
        for member in self.members:
            found = getattr(member.provider, "default_model", None)
            if isinstance(found, str) and found:
                return found
        return None

    def __repr__(self) -> str:
        return f"PoolProvider(name={self._name!r}, members={[s.name for s in self.states]!r})"

    # -- chat --------------------------------------------------------------------------

    def chat_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the reply to ``request`` from one member (see the class)."""
        return PoolRequest(self, request).events()

    def status(self) -> list[MemberStatus]:
        """How each member stands now: its circuit, requests in flight, attempts."""
        now = self.clock.now()
        return [state.status(now) for state in self.states]

    async def refresh(self, states: Sequence[MemberState]) -> None:
        """Read again the loaded models of the members in ``states`` whose list is old."""
        now = self.clock.now()
        stale = [s for s in states if s.stale(now, self.running_seconds)]
        if not stale:
            return
        if len(stale) == 1:
            await stale[0].refresh()
            return
        async with anyio.create_task_group() as group:
            for state in stale:
                group.start_soon(state.refresh)

    def served(self, request: ProviderRequest, state: MemberState) -> None:
        """Remember which member answers a conversation (its token counts are anchored there)."""
        conversation = request.conversation_id
        if conversation is None:
            return
        served = self._served
        if served.get(conversation) is not state:
            served.pop(conversation, None)
            served[conversation] = state
            if len(served) > _REMEMBERED:
                del served[next(iter(served))]

    # -- what the members can do, together ---------------------------------------------

    async def count_tokens(self, request: ProviderRequest) -> int:
        """The member that answered the conversation last counts (its server's count is
        the exact one); else characters / 4."""
        conversation = request.conversation_id
        state = self._served.get(conversation) if conversation is not None else None
        if state is not None and isinstance(state.provider, TokenCounting):
            try:
                return await state.provider.count_tokens(request)
            except Exception:
                log.debug("%s could not count the tokens", state.name, exc_info=True)
        return fallback_count(request)

    async def model_capabilities(self, model: str) -> ModelCapabilities:
        """What ``model`` can do on the pool: what one member can, with the largest window.

        Tools (vision, thinking) are ``True`` when a member says so (the pool sends a
        request that needs them to such a member), ``False`` when every member says not.
        """
        found: list[ModelCapabilities | None] = [None] * len(self.states)
        windows: list[int | None] = [None] * len(self.states)

        async def ask(state: MemberState) -> None:
            found[state.index] = await state.capabilities(model)
            windows[state.index] = await state.window(model)

        async with anyio.create_task_group() as group:
            for state in self.states:
                group.start_soon(ask, state)
        known = [w for w in windows if w is not None]
        return ModelCapabilities(
            tools=_any([c.tools if c is not None else None for c in found]),
            vision=_any([c.vision if c is not None else None for c in found]),
            thinking=_any([c.thinking if c is not None else None for c in found]),
            completion=_any([c.completion if c is not None else None for c in found]),
            context_window=max(known) if known else None,
        )

    async def list_models(self) -> list[ModelInfo]:
        """The models of every member that lists its own, each name once, sorted."""
        listed: dict[str, ModelInfo] = {}
        errors: list[OllmError] = []
        for state in self.states:
            if not isinstance(state.provider, ModelListing):
                continue
            try:
                models = await state.provider.list_models()
            except OllmError as exc:
                errors.append(exc)
                continue
            for model in models:
                listed.setdefault(model.name, model)
        if not listed and errors:
            raise errors[0]
        return sorted(listed.values(), key=lambda m: m.name)

    async def show_model(self, name: str) -> ModelInfo:
        """``name`` as the first member that has it describes it."""
        for state in self.states:
            if not isinstance(state.provider, ModelListing):
                continue
            try:
                return await state.provider.show_model(name)
            except OllmError:
                log.debug("%s cannot show %r", state.name, name, exc_info=True)
        raise ModelNotFoundError(
            f"No member of {self._name} has the model {name!r}. See what they have with: "
            f"ollm models -p {self._name} list",
            provider=self._name,
            model=name,
        )

    # -- lifetime ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close every member."""
        for state in self.states:
            if isinstance(state.provider, Closeable):
                try:
                    await state.provider.aclose()
                except Exception:
                    log.warning("closing %s failed", state.name, exc_info=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _any(values: list[bool | None]) -> bool | None:
    """``True`` if one says so, ``False`` if all say not, else unknown."""
    if any(v is True for v in values):
        return True
    if values and all(v is False for v in values):
        return False
    return None


def _members_retry_off(members: Sequence[Member]) -> None:
    """The pool owns the retry budget: its HTTP members try each request once."""
    if not any(hasattr(m.provider, "retry") for m in members):
        return
    from ollm_http import NO_RETRY, HTTPProvider

    for member in members:
        if isinstance(member.provider, HTTPProvider):
            member.provider.retry = NO_RETRY
