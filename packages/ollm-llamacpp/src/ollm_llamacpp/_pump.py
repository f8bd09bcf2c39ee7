"""Internal: a blocking producer in a thread of its own, its items read on the event loop.

The producer (a generation) gets ``stopped()``, true once the reader has gone, and
``emit(item)``, which hands an item to the event loop (``anyio.from_thread.run_sync``
with the loop's token, so any thread may call it, on asyncio and trio alike). The loop
never blocks: it waits on a memory stream. When the reader stops early, the producer
is told and waited for (shielded), so that nothing runs on the model after the stream
closed.
"""

from __future__ import annotations

import math
import threading
from collections.abc import AsyncGenerator, Callable
from typing import Generic, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

__all__ = ["Finished", "pump"]

T = TypeVar("T")
R = TypeVar("R")


class Finished(Generic[R]):
    """The producer's result, the last item of the stream."""

    __slots__ = ("result",)

    def __init__(self, result: R) -> None:
        self.result = result


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


Producer = Callable[[Callable[[], bool], Callable[[T], None]], R]


async def pump(
    produce: Producer[T, R], name: str = "ollm-llamacpp"
) -> AsyncGenerator[T | Finished[R], None]:
    """Run ``produce(stopped, emit)`` in a new thread; yield what it emits, then its result
    as ``Finished`` (an exception it raises is raised here)."""
    send, receive = anyio.create_memory_object_stream[object](math.inf)
    token = anyio.lowlevel.current_token()
    gone = threading.Event()

    def emit(item: T) -> None:
        anyio.from_thread.run_sync(send.send_nowait, item, token=token)

    def work() -> None:
        last: object
        try:
            last = Finished(produce(gone.is_set, emit))
        except BaseException as exc:  # handed to the reader, which raises it
            last = _Failed(exc)
        try:
            anyio.from_thread.run_sync(send.send_nowait, last, token=token)
        except Exception:
            return  # the event loop has ended: nobody is reading

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    ended = False
    try:
        while True:
            item = await receive.receive()
            if isinstance(item, _Failed):
                ended = True
                raise item.error
            if isinstance(item, Finished):
                ended = True
                yield item
                return
            yield item  # type: ignore[misc]  # what emit() was given
    finally:
        if not ended:
            # The reader left early: stop the producer, and wait until it has (it checks
            # stopped() after each item), so that nothing runs on the model after this.
            gone.set()
            with anyio.CancelScope(shield=True):
                while not isinstance(await receive.receive(), (Finished, _Failed)):
                    pass
        receive.close()
        send.close()
