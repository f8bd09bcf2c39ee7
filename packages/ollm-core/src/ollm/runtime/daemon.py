"""Plain (not async) functions run in daemon threads of ollm's own, awaited from a task.

What middleware's plain methods run in. anyio's worker threads are not daemons: one
stuck for ever in a call the chat gave up on (its timeout passed, or it was aborted)
would keep the Python process from exiting. A daemon thread left behind ends with the
process. Threads are reused, like a pool's: a call costs a queue put and a wake-up, not
a thread start; one idle for ``_IDLE_SECONDS`` ends.

Internal: not part of ollm's public API; its layout may change in any release.
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

__all__ = ["run_in_daemon_thread"]

T = TypeVar("T")

_IDLE_SECONDS = 10.0
_Job = Callable[[], None]


class _Workers:
    """Daemon threads, each waiting on its own inbox for the next job."""

    def __init__(self) -> None:
        self._idle: list[queue.SimpleQueue[_Job]] = []
        self._lock = threading.Lock()

    def submit(self, job: _Job) -> None:
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            thread = threading.Thread(
                target=self._work, args=(inbox,), name="ollm-middleware", daemon=True
            )
            thread.start()
        inbox.put(job)

    def _work(self, inbox: queue.SimpleQueue[_Job]) -> None:
        while True:
            try:
                job = inbox.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:  # else a job is on its way: take it
                        self._idle.remove(inbox)
                        return
                continue
            job()
            with self._lock:
                self._idle.append(inbox)


_workers = _Workers()


async def run_in_daemon_thread(func: Callable[[], T]) -> T:
    """``func()`` in a daemon thread, with the caller's context variables; its result,
    or its exception raised here. Cancelling the caller abandons the call: the thread
    goes on until ``func`` returns (or the process exits), and its outcome is dropped."""
    token = anyio.lowlevel.current_token()
    context = contextvars.copy_context()
    done = anyio.Event()
    outcome: list[tuple[bool, Any]] = []

    def job() -> None:
        try:
            outcome.append((True, context.run(func)))
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome.append((False, exc))
        # The event loop may have ended meanwhile: then nobody waits any more.
        with contextlib.suppress(Exception):
            anyio.from_thread.run_sync(done.set, token=token)

    _workers.submit(job)
    await done.wait()
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    result: T = value
    return result
