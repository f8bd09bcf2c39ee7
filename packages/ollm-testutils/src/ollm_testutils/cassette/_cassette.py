"""``Cassette``: the episodes of one file, replayed or recorded as its mode says."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self, get_args

from ollm_testutils.cassette._format import Episode, diff_against_nearest, dump, key_of, load
from ollm_testutils.cassette._secrets import Scrubber

if TYPE_CHECKING:
    import ollm
    from ollm_testutils.cassette._route import Route

__all__ = ["Cassette", "CassetteMiss", "Miss", "RecordMode"]

RecordMode = Literal["none", "new_episodes", "all"]
MODES: tuple[str, ...] = get_args(RecordMode)


class CassetteMiss(AssertionError):
    """Requests the cassette has no recording of (the message shows the differences)."""


class Miss:
    """A request that found no recording: what it was, and how it differs from the
    nearest recorded one."""

    def __init__(self, request: dict[str, Any], diff: str) -> None:
        self.request = request
        self.diff = diff

    @property
    def what(self) -> str:
        """One line: the wire or provider, and the path or model."""
        r = self.request
        if "wire" in r:
            return f"{r['wire']} {r.get('method')} {r.get('path')}"
        return f"{r.get('provider')} chat_stream (model {r.get('model')!r})"


class Cassette:
    """The recorded exchanges of one file, and the servers that replay or record them.

    ``mode``: ``"none"`` replays only (a request with no recording is a miss);
    ``"new_episodes"`` replays what is recorded and records what is not, from the
    upstream; ``"all"`` records everything again. ``rerecord`` is the command a miss's
    message tells to run (the pytest plugin gives the test's own).

    ``url(upstream, wire=...)`` is the address to give a provider in place of its
    server's; ``provider(factory, name=...)`` wraps an in-process provider. Use it as a
    context manager (``with``); on leaving, the servers stop and what was recorded is
    written. ``check()`` raises ``CassetteMiss`` when a request found no recording.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        mode: RecordMode = "none",
        rerecord: str | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.path = Path(path)
        self.mode: RecordMode = mode
        self.rerecord = rerecord or "record it with mode='new_episodes'"
        self.scrubber = Scrubber()
        self.recorded: list[Episode] = load(self.path) if mode != "all" else []
        self.misses: list[Miss] = []
        self._missed: set[str] = set()
        self._new: list[Episode] = []
        self._lock = threading.Lock()
        self._unplayed: dict[str, list[Episode]] = defaultdict(list)
        self._last: dict[str, Episode] = {}
        for episode in self.recorded:
            self._unplayed[episode.key].append(episode)
            self._last[episode.key] = episode
        self._routes: dict[tuple[str, str], Route] = {}
        self._closed = False

    # -- what a test uses --------------------------------------------------------------

    @property
    def recording(self) -> bool:
        """Whether requests with no recording go to the real upstream."""
        return self.mode != "none"

    def url(self, upstream: str, *, wire: str) -> str:
        """The URL to give a provider in place of ``upstream`` (its base URL).

        Replaying, ``upstream`` is never contacted: the wire's fake server answers on
        127.0.0.1 with the recorded frames. Recording, the same server passes each
        request on to ``upstream`` and records the reply as it streams through.
        """
        from ollm_testutils.cassette._route import Route

        with self._lock:
            if self._closed:
                raise RuntimeError("the cassette is closed")
            route = self._routes.get((wire, upstream))
            if route is None:
                route = Route(self, wire, upstream)
                self._routes[(wire, upstream)] = route
        return route.url

    def provider(self, factory: Callable[[], Any], *, name: str) -> ollm.ProviderAdapter:
        """An in-process provider (``ollm-llamacpp``'s) recorded at the level of its
        events. ``factory`` builds the real provider, and is called only to record."""
        from ollm_testutils.cassette._provider import CassetteProvider

        return CassetteProvider(self, factory, name)

    def check(self) -> None:
        """Raise ``CassetteMiss`` if any request found no recording."""
        report = self.report()
        if report:
            raise CassetteMiss(report)

    def report(self) -> str:
        """What the misses were, with their diffs and the command to record them; ``""``
        when there were none."""
        with self._lock:
            misses = list(self.misses)
        if not misses:
            return ""
        lines = []
        where = str(self.path) if self.path.exists() else f"{self.path} (no such file yet)"
        for miss in misses:
            lines += [
                f"ollm cassette: no recording of this request in {where}",
                f"  ({miss.what}). The nearest recording differs:",
                miss.diff,
                "",
            ]
        lines.append(f"If the change is meant, record again: {self.rerecord}")
        return "\n".join(lines)

    # -- life cycle --------------------------------------------------------------------

    def close(self) -> None:
        """Stop the servers and write what was recorded (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            routes = list(self._routes.values())
        for route in routes:
            route.stop()
        self.save()

    def save(self) -> None:
        """Write the cassette if anything was recorded (``all``: this run's alone)."""
        with self._lock:
            if not self._new:
                return
            episodes = self._new if self.mode == "all" else [*self.recorded, *self._new]
            # Secrets learnt late (a later request's key) leave earlier episodes too.
            episodes = [self._scrubbed(e) for e in episodes]
        dump(self.path, episodes)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import anyio.to_thread

        await anyio.to_thread.run_sync(self.close)

    # -- what the routes and the provider wrapper use ----------------------------------

    def take(self, key: str) -> Episode | None:
        """The next unplayed episode of ``key`` (the last one again once all played),
        or ``None``. Always ``None`` in ``all`` mode."""
        if self.mode == "all":
            return None
        with self._lock:
            queue = self._unplayed.get(key)
            if queue:
                return queue.pop(0)
            return self._last.get(key)

    def add(self, episode: Episode) -> None:
        """Keep a newly recorded episode."""
        with self._lock:
            self._new.append(episode)

    def miss(self, request: dict[str, Any]) -> str:
        """Note a request with no recording; the one-line message for its error reply."""
        with self._lock:
            recorded = [*self.recorded, *self._new]
        key = key_of(request)
        if key not in self._missed:
            diff = diff_against_nearest(request, recorded)
            with self._lock:
                self._missed.add(key)
                self.misses.append(Miss(request, diff))
        return (
            f"ollm cassette: no recording of this request in {self.path}; "
            "the test's failure shows the difference from the nearest one"
        )

    def _scrubbed(self, episode: Episode) -> Episode:
        scrub = self.scrubber
        reply = episode.reply
        if reply is not None:
            reply.frames = scrub.frames(reply.frames)
        events = scrub.json(episode.events) if episode.events is not None else None
        return Episode(scrub.json(episode.request), reply, events)
