"""``running(app)``: ollm serve in a thread of this process, for tests and notebooks."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["running"]


@contextlib.contextmanager
def running(app: Any, *, host: str = "127.0.0.1", port: int = 0, grace: int = 5) -> Iterator[str]:
    """Serve ``app`` on uvicorn in a thread; yields its URL (``http://127.0.0.1:PORT``).

    The socket is bound before the thread starts, so the URL answers at once (a request
    waits in the socket's queue until the server takes it): nothing to poll. On leaving,
    the server stops; requests still running get ``grace`` seconds.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)
        bound = sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            http="httptools",
            lifespan="off",
            log_level="warning",
            timeout_graceful_shutdown=grace,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="ollm-serve", daemon=True
        )
        thread.start()
        try:
            yield f"http://{host}:{bound}"
        finally:
            server.should_exit = True
            thread.join()
    finally:
        sock.close()
