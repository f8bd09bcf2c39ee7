"""A blocking face for scripts and notebooks, on anyio's blocking portal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal

from ollm.runtime.client import ChatClient, ChatResult, ChatStream, Prompt
from ollm.runtime.conversation import Conversation
from ollm.types.events import ChatEvent

__all__ = ["SyncChatClient"]


class SyncChatClient:
    """``ChatClient`` without ``async``: an event loop runs in a background thread.

    ::

        with ollm.SyncChatClient(model="llama3.2") as client:
            print(client.run("Hello!").text)
            for event in client.chat("And in French?"):
                ...

    Takes a ``ChatClient`` or the same keyword arguments as one. ``backend`` is
    ``"asyncio"`` or ``"trio"``. Ctrl-C while iterating aborts the chat cleanly.
    """

    def __init__(
        self, client: ChatClient | None = None, *, backend: str = "asyncio", **kwargs: Any
    ) -> None:
        self.client = client if client is not None else ChatClient(**kwargs)
        self._backend = backend
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None

    @property
    def conversation(self) -> Conversation:
        """The client's conversation."""
        return self.client.conversation

    def _get_portal(self) -> BlockingPortal:
        if self._portal is None:
            self._portal_cm = start_blocking_portal(self._backend)
            self._portal = self._portal_cm.__enter__()
        return self._portal

    def run(self, prompt: Prompt = None, **kwargs: Any) -> ChatResult:
        """Run a chat to its end (see ``ChatClient.run``)."""
        portal = self._get_portal()

        async def run() -> ChatResult:
            return await self.client.run(prompt, **kwargs)

        return portal.call(run)

    def chat(self, prompt: Prompt = None, **kwargs: Any) -> Iterator[ChatEvent]:
        """The chat's events, one at a time, as they arrive."""
        portal = self._get_portal()
        stream: ChatStream = self.client.chat(prompt, **kwargs)
        iterator = stream.__aiter__()

        async def step() -> ChatEvent | None:
            try:
                return await iterator.__anext__()
            except StopAsyncIteration:
                return None

        try:
            while True:
                event = portal.call(step)
                if event is None:
                    return
                yield event
        except BaseException:
            stream.abort("interrupted")
            raise
        finally:
            portal.call(stream.aclose)

    def close(self) -> None:
        """Close the client's providers and stop the background loop."""
        if self._portal is not None and self._portal_cm is not None:
            try:
                self._portal.call(self.client.aclose)
            finally:
                self._portal_cm.__exit__(None, None, None)
                self._portal = self._portal_cm = None

    def __enter__(self) -> SyncChatClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
