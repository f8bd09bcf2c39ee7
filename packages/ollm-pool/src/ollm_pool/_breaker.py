"""A member's circuit breaker, and the clock it and the pool's waits read.

A member that cannot be reached (the connection refused, reset, timed out) is left
alone for a while instead of costing every request a failed connection: its circuit
*opens*. After a backoff (1 s, then 2, 4... up to a limit, for each failure in a row)
it is *half-open*: the next request is its one probe, while the others go elsewhere. A
probe that succeeds closes the circuit; one that fails opens it again for twice as long.
Any answer from the server (a reply, or a refusal such as "model not found") counts as
a success: the server is there.
"""

from __future__ import annotations

import math
import time
from typing import Literal, Protocol

import anyio

__all__ = ["CircuitBreaker", "CircuitState", "Clock", "SystemClock"]

CircuitState = Literal["closed", "open", "half-open"]
"""``closed``: in use; ``open``: left alone until its backoff ends; ``half-open``: its
backoff ended, and the next request probes it."""


class Clock(Protocol):
    """What the pool reads the time from and waits with: the system's, or a test's."""

    def now(self) -> float:
        """Seconds on a clock that never goes back (only differences matter)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock."""
        ...


class SystemClock:
    """``time.monotonic`` and ``anyio.sleep``: the clock a pool uses unless given one."""

    def now(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """``anyio.sleep(seconds)``."""
        await anyio.sleep(seconds)


class CircuitBreaker:
    """The circuit of one member: closed, open until a moment, or half-open with one probe.

    ``backoff`` is the first wait after a failure, doubled for each further failure in
    a row, and never longer than ``max_backoff``. Times are read from the pool's clock
    and passed in (``now``), so that the breaker is a plain state machine.
    """

    __slots__ = ("_probing", "backoff", "failures", "max_backoff", "open_until")

    def __init__(self, *, backoff: float = 1.0, max_backoff: float = 60.0) -> None:
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.failures = 0
        self.open_until: float | None = None
        self._probing = False

    @property
    def probing(self) -> bool:
        """Whether its probe is out: a request is finding out whether the server is back."""
        return self._probing

    def state(self, now: float) -> CircuitState:
        """The circuit's state at ``now``."""
        if self.open_until is None:
            return "closed"
        return "open" if now < self.open_until or self._probing else "half-open"

    def ready_at(self, now: float) -> float:
        """When a request may next be sent: ``now`` if it may now, ``inf`` while a probe
        is out (its outcome decides)."""
        if self.open_until is None:
            return now
        if self._probing:
            return math.inf
        return max(now, self.open_until)

    def take(self, now: float) -> bool:
        """Send a request now, if the circuit lets one through; ``True`` if it is the
        probe of a half-open circuit (its outcome closes or opens it again)."""
        if self.open_until is None:
            return False
        self._probing = True
        return True

    def success(self) -> None:
        """The server answered: close the circuit."""
        self.failures = 0
        self.open_until = None
        self._probing = False

    def failure(self, now: float, *, probe: bool) -> None:
        """The server could not be reached. A closed circuit opens; a failed probe opens it
        again for twice as long; a request sent before the circuit opened changes
        nothing (one outage, not one per request that was on its way)."""
        if self.open_until is not None and not probe:
            return
        self.failures += 1
        wait = min(self.max_backoff, self.backoff * 2 ** (self.failures - 1))
        self.open_until = now + wait
        self._probing = False

    def release(self, probe: bool) -> None:
        """A probe that ended without a verdict (the chat was stopped): the circuit stays
        half-open, for the next request to probe."""
        if probe:
            self._probing = False
