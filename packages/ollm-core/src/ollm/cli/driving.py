"""Drive an async iterator from the main thread, with Ctrl-C handled the way people expect."""

from __future__ import annotations

import concurrent.futures
import queue
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal

__all__ = ["drive"]

T = TypeVar("T")

# How long a second Ctrl-C waits for the iterator to close (a chat then keeps its partial
# reply in the history, for the caller to log) before it propagates regardless.
SETTLE_SECONDS = 5.0


class _End:
    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def drive(
    portal: BlockingPortal,
    iterator: AsyncIterator[T],
    on_item: Callable[[T], None],
    on_interrupt: Callable[[], None],
) -> None:
    """Hand every item of ``iterator`` to ``on_item``, in this thread, as it arrives.

    One task in the portal's loop iterates (and finally closes) the iterator and puts
    the items in a queue; this thread only waits on the queue, which a Ctrl-C can
    interrupt at any point without losing or duplicating an item. The first Ctrl-C calls
    ``on_interrupt`` (which should make the iterator end soon, for example by aborting
    a chat) and goes on; a second one propagates, once the iterator is closed (a chat's
    partial reply is then in its history) or ``SETTLE_SECONDS`` have passed.
    """
    items: queue.SimpleQueue[Any] = queue.SimpleQueue()
    quitting = False  # set by this thread on the second Ctrl-C, read by the pump

    async def pump() -> None:
        error: BaseException | None = None
        try:
            async for item in iterator:
                if quitting:
                    break  # nobody reads any more: a flood must not pile up meanwhile
                items.put(item)
        except Exception as exc:
            error = exc
        finally:
            try:
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    await aclose()
            finally:
                items.put(_End(error))

    future = portal.start_task_soon(pump)
    interrupted = False
    try:
        while True:
            try:
                item = items.get()
                if isinstance(item, _End):
                    if item.error is not None:
                        raise item.error
                    return
                on_item(item)
            except KeyboardInterrupt:
                if interrupted:
                    quitting = True
                    future.cancel()
                    # The pump stops at its next item, or at its next checkpoint, and
                    # closes the iterator; a third Ctrl-C ends this wait too.
                    concurrent.futures.wait([future], timeout=SETTLE_SECONDS)
                    raise
                interrupted = True
                on_interrupt()
    except BaseException:
        future.cancel()
        raise
