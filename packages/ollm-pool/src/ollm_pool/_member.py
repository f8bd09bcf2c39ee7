"""A pool's members: what the user says of each (``Member``), and what the pool learns
of it while it runs (``MemberState``: its circuit, its requests in flight, the models it
has loaded, its context windows)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import msgspec

from ollm.errors import ErrorCode, OllmError
from ollm.types import ModelCapabilities, ModelInspection, ProviderAdapter, RunningModels
from ollm_pool._breaker import CircuitBreaker, CircuitState, Clock

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["TRANSPORT_CODES", "Member", "MemberState", "MemberStatus"]

log = logging.getLogger("ollm_pool")

# Failures that say the server cannot be reached: they open its circuit.
TRANSPORT_CODES = frozenset(
    {
        ErrorCode.CONNECTION_FAILED,
        ErrorCode.TIMEOUT,
        ErrorCode.TLS_ERROR,
        ErrorCode.STREAM_INTERRUPTED,
    }
)
# The longest wait for a member's list of loaded models before choosing without it.
RUNNING_TIMEOUT = 2.0


@dataclass(frozen=True)
class Member:
    """One server of a pool: a provider instance, and what the pool should know of it.

    ``parallel`` is how many requests the server serves at once (Ollama's
    ``OLLAMA_NUM_PARALLEL``, 4 by default; a vLLM server takes far more): beyond it, a
    request goes to a member with a free slot, even one that must load the model.
    ``context_window`` declares the window the server runs its models with, when its
    provider cannot tell (the pool asks ``model_capabilities`` otherwise). ``name`` is
    how messages name it (by default the provider's name and address).
    """

    provider: ProviderAdapter
    name: str | None = None
    parallel: int = 4
    context_window: int | None = None

    def __post_init__(self) -> None:
        if not callable(getattr(self.provider, "chat_stream", None)):
            raise TypeError(f"a pool member must be a provider, not {self.provider!r}")
        if isinstance(self.parallel, bool) or not isinstance(self.parallel, int):
            raise TypeError("parallel must be a whole number of requests")
        if self.parallel < 1:
            raise ValueError("parallel must be at least 1")
        if self.context_window is not None and self.context_window < 1:
            raise ValueError("context_window must be a positive number of tokens")

    @property
    def label(self) -> str:
        """``name``, else the provider's name and address (``ollama at http://gpu-a:11434``)."""
        if self.name:
            return self.name
        url = getattr(self.provider, "url", None)
        kind = getattr(self.provider, "name", type(self.provider).__name__)
        return f"{kind} at {url}" if isinstance(url, str) else str(kind)


class MemberStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """How one member stands now (``PoolProvider.status()``).

    ``attempts`` counts the chat requests sent to it since the pool started, ``failures``
    the failures to reach it in a row, ``retry_in`` the seconds until its open circuit
    lets a probe through.
    """

    name: str
    state: CircuitState
    in_flight: int
    parallel: int
    attempts: int = 0
    failures: int = 0
    retry_in: float | None = None


class MemberState:
    """What the pool knows of one member while it runs. Internal to the pool."""

    __slots__ = (
        "_capabilities",
        "_refreshing",
        "attempts",
        "breaker",
        "clock",
        "cooling_until",
        "in_flight",
        "index",
        "inspects",
        "lists_running",
        "member",
        "name",
        "provider",
        "running",
        "running_at",
        "trouble",
        "verdict",
    )

    def __init__(
        self, member: Member, index: int, name: str, breaker: CircuitBreaker, clock: Clock
    ) -> None:
        self.member = member
        self.index = index
        self.name = name
        self.provider = member.provider
        self.breaker = breaker
        self.clock = clock
        self.in_flight = 0
        self.attempts = 0
        # Not before this moment: the server asked to wait (Retry-After).
        self.cooling_until = -math.inf
        self.lists_running = isinstance(self.provider, RunningModels)
        self.inspects = isinstance(self.provider, ModelInspection)
        # The models it has loaded (canonical names), and when that was read; None: unknown.
        self.running: dict[str, int | None] | None = None
        self.running_at = -math.inf
        self._refreshing: anyio.Event | None = None
        self._capabilities: dict[str, ModelCapabilities | None] = {}
        self.trouble = ""  # what the last failure to reach it said
        # Set when its probe has an outcome, for the requests that wait for it.
        self.verdict: anyio.Event | None = None

    # -- availability ----------------------------------------------------------------

    def ready_at(self, now: float) -> float:
        """When a request may next go to it (``now``: at once)."""
        return max(self.breaker.ready_at(now), self.cooling_until)

    def status(self, now: float) -> MemberStatus:
        """How it stands at ``now``."""
        state = self.breaker.state(now)
        until = self.breaker.open_until
        return MemberStatus(
            name=self.name,
            state=state,
            in_flight=self.in_flight,
            parallel=self.member.parallel,
            attempts=self.attempts,
            failures=self.breaker.failures,
            retry_in=max(0.0, until - now) if state == "open" and until is not None else None,
        )

    def reached(self) -> None:
        """The server answered: its circuit closes."""
        self.breaker.success()
        self._decided()

    def unreachable(self, now: float, code: str, message: str, *, probe: bool) -> None:
        """A failure with ``code``: one that says the server cannot be reached opens its
        circuit (and what it had loaded is unknown again)."""
        if code in TRANSPORT_CODES:
            self.trouble = message
            self.breaker.failure(now, probe=probe)
            self.running = None
            self.running_at = -math.inf
            self._decided()

    def release(self, probe: bool) -> None:
        """A request to it ended: if it was the probe and left no outcome (it was
        stopped), the next request probes it."""
        if probe:
            self.breaker.release(probe)
            self._decided()

    async def wait_for_verdict(self) -> None:
        """Wait until its probe has an outcome (at once if none is out)."""
        if not self.breaker.probing:
            return
        if self.verdict is None:
            self.verdict = anyio.Event()
        await self.verdict.wait()

    def _decided(self) -> None:
        """Wake the requests that wait for the outcome of its probe."""
        if self.verdict is not None and not self.breaker.probing:
            self.verdict.set()
            self.verdict = None

    # -- loaded models ---------------------------------------------------------------

    def loaded(self, model: str) -> bool | None:
        """Whether ``model`` is loaded there: ``None`` when it cannot say (a server that
        keeps its model loaded, or whose list could not be read)."""
        running = self.running
        if running is None:
            return None
        return _canonical(model) in running

    def window_loaded(self, model: str) -> int | None:
        """The context window ``model`` is loaded with there, if it is loaded."""
        running = self.running
        return None if running is None else running.get(_canonical(model))

    def stale(self, now: float, seconds: float) -> bool:
        """Whether its list of loaded models should be read again (a closed circuit's)."""
        return (
            self.lists_running
            and self.breaker.open_until is None
            and now - self.running_at >= seconds
        )

    def loads(self, model: str) -> None:
        """It answered for ``model``: the model is loaded there now."""
        if self.lists_running and self.running is not None:
            self.running.setdefault(_canonical(model), None)

    async def refresh(self) -> None:
        """Read its list of loaded models (one reading at a time, shared by the requests
        that want it); a server that cannot be reached opens its circuit."""
        clock = self.clock
        if self._refreshing is not None:
            await self._refreshing.wait()
            return
        self._refreshing = done = anyio.Event()
        running: dict[str, int | None] | None = None
        try:
            with anyio.move_on_after(RUNNING_TIMEOUT):
                models = await self.provider.running_models()  # type: ignore[attr-defined]
                running = {_canonical(m.name): m.context_window for m in models}
        except OllmError as exc:
            log.debug("the loaded models of %s are unknown", self.name, exc_info=True)
            self.unreachable(clock.now(), exc.code, exc.message, probe=False)
        except Exception:
            log.debug("the loaded models of %s are unknown", self.name, exc_info=True)
        finally:
            self.running = running
            self.running_at = clock.now()
            self._refreshing = None
            done.set()

    # -- what its models can do ------------------------------------------------------

    async def capabilities(self, model: str) -> ModelCapabilities | None:
        """What ``model`` can do there (``None``: unknown), asked once per model; a
        member whose circuit is open is not asked (nor one that cannot say)."""
        if model in self._capabilities:
            return self._capabilities[model]
        if not self.inspects or self.breaker.open_until is not None:
            return None
        found: ModelCapabilities | None = None
        try:
            found = await self.provider.model_capabilities(model)  # type: ignore[attr-defined]
        except OllmError as exc:
            log.debug("the capabilities of %r at %s are unknown", model, self.name, exc_info=True)
            if exc.code in TRANSPORT_CODES:
                self.unreachable(self.clock.now(), exc.code, exc.message, probe=False)
                return None  # asked again once it is back
        except Exception:
            log.debug("the capabilities of %r at %s are unknown", model, self.name, exc_info=True)
        self._capabilities[model] = found
        return found

    async def window(self, model: str) -> int | None:
        """The context window of ``model`` there: declared, loaded with, or reported."""
        if self.member.context_window is not None:
            return self.member.context_window
        loaded = self.window_loaded(model)
        if loaded is not None:
            return loaded
        capabilities = await self.capabilities(model)
        return capabilities.context_window if capabilities is not None else None

    async def takes_tools(self, model: str) -> bool | None:
        """Whether ``model`` calls tools there (``None``: unknown)."""
        capabilities = await self.capabilities(model)
        return capabilities.tools if capabilities is not None else None


def _canonical(model: str) -> str:
    """``llama3.2`` as Ollama lists it: ``llama3.2:latest``."""
    return model if ":" in model.rpartition("/")[2] else f"{model}:latest"


def unique_names(members: Iterable[Member]) -> list[str]:
    """Each member's label, made unique (``#2``...) where two would read the same."""
    names: list[str] = []
    for member in members:
        label = member.label
        name, number = label, 1
        while name in names:
            number += 1
            name = f"{label} #{number}"
        names.append(name)
    return names
