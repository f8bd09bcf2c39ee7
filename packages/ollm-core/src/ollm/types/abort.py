"""An abort signal that any task or thread may trigger."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio
import anyio.lowlevel

__all__ = ["AbortSignal"]


class _Waiter:
    __slots__ = ("scope", "thread", "token")

    def __init__(
        self, scope: anyio.CancelScope, thread: int, token: anyio.lowlevel.EventLoopToken
    ) -> None:
        self.scope = scope
        self.thread = thread
        self.token = token


class AbortSignal:
    """Stops a chat wherever it is: the provider's stream, running tools, waits.

    ``abort()`` is safe to call from any thread and more than once. Code that waits
    on something slow wraps the wait in ``with signal.guard():``; the guard's cancel
    scope is cancelled when the signal fires, even if that happens in another thread.
    Checking ``signal.aborted`` between steps costs one attribute read.
    """

    __slots__ = ("_aborted", "_callbacks", "_lock", "_reason", "_waiters")

    def __init__(self) -> None:
        self._aborted = False
        self._reason = ""
        self._lock = threading.Lock()
        self._waiters: list[_Waiter] = []
        self._callbacks: list[Callable[[], object]] = []

    @property
    def aborted(self) -> bool:
        """True once ``abort()`` has been called."""
        return self._aborted

    @property
    def reason(self) -> str:
        """What ``abort()`` was given, or ``""``."""
        return self._reason

    def abort(self, reason: str = "aborted") -> None:
        """Trigger the signal. Idempotent and thread-safe."""
        with self._lock:
            if self._aborted:
                return
            self._aborted = True
            self._reason = reason
            waiters = list(self._waiters)
            callbacks = list(self._callbacks)
        current = threading.get_ident()
        for waiter in waiters:
            if waiter.thread == current:
                waiter.scope.cancel()
            else:
                _cancel_soon(waiter)
        for callback in callbacks:
            callback()

    def on_abort(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` (in the aborting thread) when the signal fires.

        Runs at once if the signal already fired. Returns a function that removes it.
        """
        with self._lock:
            if not self._aborted:
                self._callbacks.append(callback)

                def remove() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return remove
        callback()
        return lambda: None

    @contextmanager
    def guard(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope that the signal cancels; check ``cancelled_caught`` after it.

        Enter it around an await that may block for long (a network read, a tool).
        It costs a few microseconds, so wrap reads of the network, not each event.
        """
        scope = anyio.CancelScope()
        waiter = _Waiter(scope, threading.get_ident(), anyio.lowlevel.current_token())
        with self._lock:
            if self._aborted:
                scope.cancel()
            else:
                self._waiters.append(waiter)
        try:
            with scope:
                yield scope
        finally:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def wait(self) -> None:
        """Return once the signal has fired."""
        with self.guard():
            await anyio.sleep_forever()

    def __repr__(self) -> str:
        state = f"aborted ({self._reason})" if self._aborted else "armed"
        return f"<AbortSignal {state}>"


def _cancel_soon(waiter: _Waiter) -> None:
    """Cancel a scope that belongs to an event loop in another thread."""
    token = waiter.token
    try:
        # Non-blocking, thread-safe scheduling on the loop that owns the scope
        # (call_soon_threadsafe on asyncio, TrioToken.run_sync_soon on trio).
        token.backend_class.run_sync_soon(waiter.scope.cancel, (), token.native_token)
    except Exception:
        # The loop has finished: nothing is waiting any more.
        return
