"""Drive an async iterator from the main thread, with Ctrl-C handled the way people expect."""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from types import FrameType
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal

__all__ = ["deferred_interrupts", "drive"]

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
    # Set by the pump once the iterator is closed. Not the future's own state: cancelling
    # a concurrent future marks it done at once, long before the task it stands for ends.
    closed = threading.Event()

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
                closed.set()
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
                    closed.wait(SETTLE_SECONDS)
                    raise
                interrupted = True
                on_interrupt()
    except BaseException:
        future.cancel()
        raise


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Run the block whole, with a Ctrl-C heard meanwhile raised after it.

    For writes that must not stop half way (a conversation logged as the chat ends: a
    KeyboardInterrupt in the middle of it rolls the whole exchange back). A second Ctrl-C
    during the block raises at once: the person means it. Outside the main thread, or when
    Ctrl-C does not raise KeyboardInterrupt here (someone else's handler), the block
    simply runs.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    heard = 0

    def hear(signum: int, frame: FrameType | None) -> None:
        nonlocal heard
        heard += 1
        if heard > 1:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, hear)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if heard:
        raise KeyboardInterrupt
