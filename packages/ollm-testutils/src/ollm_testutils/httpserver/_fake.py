"""The life cycle every fake server shares: start, stop, context managers, its port."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Self

from ollm_testutils.httpserver._connection import Connection, HttpRequest, Response
from ollm_testutils.httpserver._server import HttpServer

__all__ = ["FakeServer", "Playback"]

Playback = Callable[[HttpRequest, Response, Connection], bool]
"""Answers a request before the fake server's own routes (true when it answered)."""


class FakeServer:
    """A fake provider server on 127.0.0.1 at a free port, served by ``HttpServer``.

    Subclasses answer requests in ``_handle``; this gives them ``start``/``stop``,
    ``with`` and ``async with`` (asyncio and trio), ``port``, ``url`` and the
    connection counts. ``playback``, when set, sees every request first: a cassette
    replays its recordings through the server of their wire that way.
    """

    def __init__(self, *, port: int = 0) -> None:
        self._http = HttpServer(self._dispatch, port=port)
        self._started = False
        self.playback: Playback | None = None

    def _dispatch(self, request: HttpRequest, response: Response, connection: Connection) -> None:
        playback = self.playback
        if playback is not None and playback(request, response, connection):
            return
        self._handle(request, response, connection)

    def _handle(self, request: HttpRequest, response: Response, connection: Connection) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        """Start serving (idempotent); returns the server."""
        if not self._started:
            self._http.start()
            self._started = True
        return self

    def stop(self) -> None:
        """Stop serving: open connections are closed, hanging replies end."""
        if self._started:
            self._http.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import anyio.to_thread

        await anyio.to_thread.run_sync(self.stop)

    @property
    def port(self) -> int:
        """The port it listens on (once started)."""
        self._require_started()
        return self._http.port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def compress(self) -> str | None:
        """``"gzip"`` or ``"deflate"`` to compress every reply body from now on (as a CDN or
        a proxy does, whether or not the client asked); ``None`` (the default) for none."""
        return self._http.compress

    @compress.setter
    def compress(self, encoding: str | None) -> None:
        if encoding not in (None, "gzip", "deflate"):
            raise ValueError(f"compress must be 'gzip', 'deflate' or None, not {encoding!r}")
        self._http.compress = encoding

    @property
    def open_connections(self) -> int:
        """Client connections open right now, idle keep-alive ones included."""
        return self._http.open_connections

    @property
    def connections_accepted(self) -> int:
        """Client connections accepted since the start."""
        return self._http.connections_accepted

    def _require_started(self) -> None:
        if not self._started:
            name = type(self).__name__
            raise RuntimeError(
                f"The {name} is not started: use it as a context manager "
                f"(with {name}() as server), or call start() first."
            )
