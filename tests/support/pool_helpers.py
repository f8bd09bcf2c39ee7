"""What the pool's tests share: a clock the test moves by hand, members for fake servers,
models loaded and unloaded through Ollama's own API, and a chat's events.

The breakers and the pool's waits read ``ManualClock``, so a test says "the backoff is
over" by moving the clock (``advance``), never by sleeping; ``sleeping()`` waits until
the pool is waiting on it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import httpx

import ollm
from ollm_ollama import OllamaProvider
from ollm_openai import OpenAIProvider
from ollm_pool import MemberStatus, PoolProvider
from ollm_testutils import FakeOllamaServer, FakeOpenAIServer

MODEL = "llama3.2"


class ManualClock:
    """A clock that moves only when the test says: ``advance(seconds)``."""

    def __init__(self) -> None:
        self.time = 1000.0
        self._sleepers: list[tuple[float, anyio.Event]] = []
        self._asleep: anyio.Event | None = None
        self._over = False

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        wake = anyio.Event()
        entry = (self.time + seconds, wake)
        self._sleepers.append(entry)
        if self._asleep is not None:
            self._asleep.set()
        try:
            await wake.wait()
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    async def sleeping(self, count: int = 1) -> float | None:
        """Wait until ``count`` tasks sleep on this clock: the seconds until the first
        wakes; ``None`` if the task that could have slept said it is ``over`` first
        (never a hang)."""
        while len(self._sleepers) < count:
            if self._over:
                self._over = False
                return None
            self._asleep = anyio.Event()
            await self._asleep.wait()
        return min(at for at, _ in self._sleepers) - self.time

    def over(self) -> None:
        """The task that could sleep on this clock has ended: stop waiting for it."""
        self._over = True
        if self._asleep is not None:
            self._asleep.set()

    def advance(self, seconds: float) -> None:
        """Move the clock, waking every sleeper whose time has come."""
        self.time += seconds
        for entry in list(self._sleepers):
            if entry[0] <= self.time:
                self._sleepers.remove(entry)
                entry[1].set()


async def without_waiting(
    clock: ManualClock, chat_client: ollm.ChatClient, prompt: str = "hi", **kwargs: Any
) -> list[Any]:
    """Every event of one chat, which must end without waiting on ``clock`` (a test
    fails, instead of hanging, if it waits)."""
    events: list[Any] = []

    async def ask() -> None:
        try:
            events.extend(await chat(chat_client, prompt, **kwargs))
        finally:
            clock.over()

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        waits = await clock.sleeping()
        assert waits is None, f"the request waits {waits} s on the clock"
    return events


def ollama(server: FakeOllamaServer | str, **settings: Any) -> OllamaProvider:
    """An Ollama member for ``server`` (or an address), with no environment."""
    url = server if isinstance(server, str) else server.url
    return OllamaProvider(url, environ={}, **settings)


def openai(server: FakeOpenAIServer, **settings: Any) -> OpenAIProvider:
    """An OpenAI-compatible member for ``server``, with no environment."""
    return OpenAIProvider(server.base_url, environ={}, **settings)


def load(server: FakeOllamaServer, model: str = MODEL, *, context: int | None = None) -> None:
    """Load ``model`` on ``server`` as a user would: a chat with no messages."""
    body: dict[str, Any] = {"model": model}
    if context is not None:
        body["options"] = {"num_ctx": context}
    httpx.post(f"{server.url}/api/chat", json=body).raise_for_status()


def unload(server: FakeOllamaServer, model: str = MODEL) -> None:
    """Unload ``model`` from ``server``: ``keep_alive: 0``."""
    httpx.post(f"{server.url}/api/chat", json={"model": model, "keep_alive": 0}).raise_for_status()


def client(pool: PoolProvider, **settings: Any) -> ollm.ChatClient:
    """A chat client on ``pool`` alone (no plugins)."""
    settings.setdefault("model", MODEL)
    return ollm.ChatClient(ollm.Registries(), provider=pool, **settings)


async def chat(chat_client: ollm.ChatClient, prompt: str = "hi", **kwargs: Any) -> list[Any]:
    """Every event of one chat."""
    async with chat_client.chat(prompt, **kwargs) as stream:
        return [event async for event in stream]


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, ollm.TextEvent))


def notices(events: list[Any], kind: str = "failover") -> list[str]:
    return [e.message for e in events if isinstance(e, ollm.NoticeEvent) and e.kind == kind]


def errors(events: list[Any]) -> list[ollm.ErrorEvent]:
    return [e for e in events if isinstance(e, ollm.ErrorEvent)]


def finish(events: list[Any]) -> ollm.FinishEvent:
    last = events[-1]
    assert isinstance(last, ollm.FinishEvent), events
    return last


def chats(server: FakeOllamaServer | FakeOpenAIServer) -> int:
    """How many chat requests ``server`` received."""
    return len(server.chat_requests)


def states(pool: PoolProvider) -> dict[str, MemberStatus]:
    """How each member of ``pool`` stands, by name."""
    return {status.name: status for status in pool.status()}


class ResettingPort:
    """A port that accepts each connection and resets it at once (a server that crashed
    mid-way, or a proxy with nothing behind it), counting the connections."""

    def __init__(self, port: int = 0) -> None:
        self.listener = socket.create_server(("127.0.0.1", port), backlog=16)
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        self.listener.settimeout(0.05)
        while not self._stop.is_set():
            try:
                sock, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            # Linger on, for 0 s: close() sends a reset, not a clean end.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.listener.close()


@contextlib.contextmanager
def resetting(port: int = 0) -> Iterator[ResettingPort]:
    listening = ResettingPort(port)
    try:
        yield listening
    finally:
        listening.close()
