"""A small HTTP/1.1 server on 127.0.0.1: keep-alive, one thread per connection.

It accepts connections and hands each request to a handler with a ``Response`` to
write; it counts the connections open, and on ``stop`` closes them all, which also
ends every response that is waiting (a delay, a hang).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable

from ollm_testutils.httpserver._connection import (
    BadRequest,
    Connection,
    HttpRequest,
    Response,
    Waker,
    json_error,
    readable,
)

__all__ = ["Handler", "HttpServer"]

log = logging.getLogger(__name__)

Handler = Callable[[HttpRequest, Response, Connection], None]


class HttpServer:
    """Accepts connections on 127.0.0.1 and hands each request to ``handler``."""

    def __init__(self, handler: Handler, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.handler = handler
        self.host = host
        self.requested_port = port
        self.port = 0
        self._listener: socket.socket | None = None
        self._waker = Waker()
        self._accept_thread: threading.Thread | None = None
        self._threads: set[threading.Thread] = set()
        self._connections: set[Connection] = set()
        self._lock = threading.Lock()
        self._stopping = False
        self.connections_accepted = 0
        # "gzip" or "deflate": every reply body is compressed (see Response.compress).
        self.compress: str | None = None

    @property
    def open_connections(self) -> int:
        """Client connections open right now (including idle keep-alive ones)."""
        with self._lock:
            return len(self._connections)

    def start(self) -> None:
        """Bind, listen and start accepting in a background thread."""
        listener = socket.create_server((self.host, self.requested_port), backlog=128)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"fake-ollama-{self.port}", daemon=True
        )
        self._accept_thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close every connection, and wait for the threads."""
        if self._stopping:
            return
        self._stopping = True
        self._waker.wake()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout)
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        with self._lock:
            connections = list(self._connections)
            threads = list(self._threads)
        for connection in connections:
            connection.close()
        for thread in threads:
            thread.join(timeout)
        self._waker.close()

    def stopping(self) -> bool:
        """Whether ``stop`` has been called (a call, so checks are never cached)."""
        return self._stopping

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while True:
            try:
                ready = readable([listener, self._waker.reader], None)
            except (OSError, ValueError):
                return
            if self._waker.reader in ready or self._stopping:
                return
            try:
                sock, _ = listener.accept()
            except OSError:
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = Connection(sock, self._waker)
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            with self._lock:
                if self.stopping():
                    connection.close()
                    return
                self._connections.add(connection)
                self._threads.add(thread)
                self.connections_accepted += 1
            thread.start()

    def _serve(self, connection: Connection) -> None:
        try:
            while not connection.closed and not self._stopping:
                try:
                    request = connection.read_request()
                except BadRequest as exc:
                    body = f"400 Bad Request: {exc}".encode()
                    response = Response(connection, head_only=False, keep_alive=False)
                    response.send(400, body, "text/plain; charset=utf-8")
                    break
                if request is None:
                    break
                response = Response(
                    connection,
                    head_only=request.method == "HEAD",
                    keep_alive=request.keep_alive,
                    compress=self.compress,
                )
                try:
                    self.handler(request, response, connection)
                except Exception as exc:
                    # A bug in a test's reply function, or in the fake server itself.
                    log.exception("the fake server failed on %s %s", request.method, request.path)
                    if not response.started:
                        response.keep_alive = False
                        detail = f"fake server failure: {type(exc).__name__}: {exc}"
                        response.send(500, json_error(detail), "application/json; charset=utf-8")
                    break
                if not response.finished or not response.keep_alive:
                    break
        finally:
            connection.close()
            with self._lock:
                self._connections.discard(connection)
                self._threads.discard(threading.current_thread())
