"""Drive an async iterator from the main thread, with Ctrl-C handled the way people expect."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from anyio.from_thread import BlockingPortal

__all__ = ["drive"]

T = TypeVar("T")


def drive(
    portal: BlockingPortal,
    iterator: AsyncIterator[T],
    on_item: Callable[[T], None],
    on_interrupt: Callable[[], None],
) -> None:
    """Pull every item of ``iterator`` through ``portal`` and hand it to ``on_item``.

    The first Ctrl-C calls ``on_interrupt`` (which should make the iterator end soon,
    for example by aborting a chat) and goes on draining it; a second one propagates.
    The iterator is closed in every case.
    """

    async def step() -> tuple[bool, Any]:
        try:
            return True, await iterator.__anext__()
        except StopAsyncIteration:
            return False, None

    interrupted = False
    pending: Future[tuple[bool, Any]] | None = None
    try:
        while True:
            try:
                if pending is None:
                    pending = portal.start_task_soon(step)
                more, item = pending.result()
                pending = None
                if not more:
                    return
                on_item(item)
            except KeyboardInterrupt:
                if interrupted:
                    raise
                interrupted = True
                on_interrupt()
    finally:
        if pending is not None:
            pending.cancel()
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            portal.call(aclose)
