"""A blocking face for scripts and notebooks: an event loop in a daemon thread.

The loop never keeps the interpreter alive: its thread is a daemon, and a client that
is never closed is closed when it is garbage-collected or, at the latest, at exit
(``weakref.finalize``), with a bounded wait. Ctrl-C while iterating ``chat()`` aborts
the chat on the loop, waits for it to end (so the history holds the partial reply),
then reaches the caller as ``KeyboardInterrupt``; the client stays usable.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any, TypeVar, overload

import anyio
from anyio.from_thread import BlockingPortal

from ollm.runtime.client import ChatClient, ChatResult, ChatStream, Prompt
from ollm.runtime.conversation import Conversation
from ollm.types.events import ChatEvent

__all__ = ["SyncChatClient"]

T = TypeVar("T")

log = logging.getLogger(__name__)

#: How long closing (and a chat's end after Ctrl-C) may wait for the providers, by default.
CLOSE_TIMEOUT = 5.0


class _Loop:
    """One event loop running in a daemon thread, reached through a blocking portal."""

    def __init__(self, backend: str, close_timeout: float) -> None:
        self._backend = backend
        self.close_timeout = close_timeout
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._portal: BlockingPortal | None = None
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._main, name="ollm-sync-loop", daemon=True)
        self.thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise self._failure

    def _main(self) -> None:
        try:
            anyio.run(self._serve, backend=self._backend)
        except BaseException as exc:  # a bad backend name, a missing trio
            self._failure = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        async with BlockingPortal() as portal:
            self._portal = portal
            self._ready.set()
            await portal.sleep_until_stopped()

    @property
    def portal(self) -> BlockingPortal:
        if self._portal is None:
            raise RuntimeError("this SyncChatClient is closed")
        return self._portal

    def call(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        return self.portal.call(func, *args)

    def shutdown(self, client: ChatClient) -> None:
        """Close the client's providers (within ``close_timeout``), then stop the loop."""
        with self._lock:
            portal, self._portal = self._portal, None
        if portal is None:
            return
        if threading.current_thread() is self.thread:
            # Collected on the loop's own thread: it cannot wait for itself.
            threading.Thread(target=self._stop, args=(portal, client), daemon=True).start()
        else:
            self._stop(portal, client)

    def _stop(self, portal: BlockingPortal, client: ChatClient) -> None:
        async def close() -> None:
            with anyio.move_on_after(self.close_timeout) as scope:
                await client.aclose()
            if scope.cancelled_caught:
                log.warning(
                    "the chat client's providers and toolsets did not close within %g"
                    " seconds; they were left behind",
                    self.close_timeout,
                )

        try:
            portal.call(close)
        finally:
            portal.call(portal.stop, True)
            self.thread.join(self.close_timeout)


class SyncChatClient:
    """``ChatClient`` without ``async``: an event loop runs in a background thread.

    ::

        with ollm.SyncChatClient(model="llama3.2") as client:
            print(client.run("Hello!").text)
            for event in client.chat("And in French?"):
                ...

    Takes a ``ChatClient`` or the same keyword arguments as one. ``backend`` is
    ``"asyncio"`` or ``"trio"``. Ctrl-C while iterating aborts the chat cleanly and
    then raises ``KeyboardInterrupt``; the partial reply stays in the history and the
    client stays usable. ``close()`` is idempotent; a client never closed does not keep
    the program from exiting (its thread is a daemon, and it is closed at exit).
    ``close_timeout`` bounds, in seconds, how long closing waits for the providers and
    toolsets, and how long a chat may take to end after Ctrl-C (5 by default).
    """

    def __init__(
        self,
        client: ChatClient | None = None,
        *,
        backend: str = "asyncio",
        close_timeout: float = CLOSE_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        self.client = client if client is not None else ChatClient(**kwargs)
        self._backend = backend
        self._close_timeout = close_timeout
        self._loop: _Loop | None = None
        self._finalizer: Callable[[], object] | None = None

    @property
    def conversation(self) -> Conversation:
        """The client's conversation."""
        return self.client.conversation

    def _get_loop(self) -> _Loop:
        if self._loop is None:
            self._loop = _Loop(self._backend, self._close_timeout)
            # Holds the loop and the client, never self, so that self can be collected.
            self._finalizer = weakref.finalize(self, self._loop.shutdown, self.client)
        return self._loop

    @overload
    def run(self, prompt: Prompt = None, *, output: type[T], **kwargs: Any) -> T: ...

    @overload
    def run(self, prompt: Prompt = None, *, output: object, **kwargs: Any) -> Any: ...

    @overload
    def run(self, prompt: Prompt = None, **kwargs: Any) -> ChatResult: ...

    def run(self, prompt: Prompt = None, **kwargs: Any) -> Any:
        """Run a chat to its end (see ``ChatClient.run``): a ``ChatResult``, or the
        validated value with ``output=T``."""

        async def run() -> Any:
            return await self.client.run(prompt, **kwargs)

        return self._get_loop().call(run)

    def chat(self, prompt: Prompt = None, **kwargs: Any) -> Iterator[ChatEvent]:
        """The chat's events, one at a time, as they arrive.

        Leaving the loop early (``break``) closes the chat. Ctrl-C aborts it, waits for
        it to end, then raises ``KeyboardInterrupt``. A call that needs a person's
        approval is refused unless the client has an ``approver`` (which may ask at the
        terminal: a plain one runs in a worker thread).
        """
        loop = self._get_loop()
        stream: ChatStream = self.client.chat(prompt, **kwargs)
        # Its caller has no stream to answer an approval request on: an approver must.
        stream._run.answerable = False
        steps = _Steps(stream, loop.close_timeout)
        interrupted = False
        try:
            while True:
                event = loop.call(steps.next)
                if event is None:
                    return
                yield event
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            loop.call(steps.close, interrupted)

    def close(self) -> None:
        """Close the client's providers and stop the background loop (idempotent)."""
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> SyncChatClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Steps:
    """One chat's steps on the loop, one at a time, and its closing after them.

    A Ctrl-C can land anywhere in the caller's thread, even while a step is being
    handed to the loop; closing waits for any step in flight instead of racing it
    (an async generator cannot be closed while it runs). After a Ctrl-C, the chat is
    aborted and given ``timeout`` seconds to end; a chat still running then (its
    provider ignores the abort) is cancelled, the step in flight included.
    """

    __slots__ = ("_iterator", "_lock", "_step", "_stream", "_timeout")

    def __init__(self, stream: ChatStream, timeout: float) -> None:
        self._stream = stream
        self._timeout = timeout
        self._iterator: AsyncIterator[ChatEvent] | None = None
        self._lock: anyio.Lock | None = None
        self._step: anyio.CancelScope | None = None

    def _events(self) -> AsyncIterator[ChatEvent]:
        if self._iterator is None:  # on the loop's thread, so the loop knows the generator
            self._iterator = self._stream.__aiter__()
        return self._iterator

    def _guard(self) -> anyio.Lock:
        if self._lock is None:  # made on the loop: every step runs there
            self._lock = anyio.Lock()
        return self._lock

    async def next(self) -> ChatEvent | None:
        async with self._guard():
            with anyio.CancelScope() as self._step:
                try:
                    return await self._events().__anext__()
                except StopAsyncIteration:
                    return None
            return None  # cancelled by close(): the caller has left already

    async def close(self, interrupted: bool) -> None:
        """Close the chat; after a Ctrl-C, abort it and let it end in the history first."""
        if interrupted:
            self._stream.abort("interrupted")
            with anyio.move_on_after(self._timeout) as waited:
                async with self._guard():
                    try:
                        async for _ in self._events():
                            pass
                    except Exception:  # the chat's own failure: it ended, recorded
                        pass
            if waited.cancelled_caught and self._step is not None:
                self._step.cancel()  # a step still waits for a provider deaf to the abort
        async with self._guard():
            await self._stream.aclose()
