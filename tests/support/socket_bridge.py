"""A real HTTP/1.1 server on 127.0.0.1 that answers with an httpx handler.

Property tests describe a server as a function ``httpx.Request -> httpx.Response``
(as for ``httpx.MockTransport``). Served through this bridge, the same function is
reached over a socket, so the provider's production stack (ollm-http's transport,
llhttp) runs: a streamed body goes out as one HTTP chunk per piece the function
yields, so the cut points a property draws are the chunk boundaries on the wire.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

Handler = Callable[[httpx.Request], httpx.Response]


class SocketBridge:
    """Serves ``handler`` (set it per example) until ``close()``."""

    def __init__(self) -> None:
        self.handler: Handler | None = None
        bridge = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # As Ollama (Go) does: no Nagle delay between the chunks of a stream.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = httpx.Request(
                    self.command,
                    f"http://127.0.0.1{self.path}",
                    headers=list(self.headers.items()),
                    content=body,
                )
                assert bridge.handler is not None
                response = bridge.handler(request)
                pieces = asyncio.run(_pieces(response))
                self.send_response(response.status_code)
                for name, value in response.headers.items():
                    if name.lower() not in ("content-length", "transfer-encoding"):
                        self.send_header(name, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for piece in pieces:
                    if piece:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


async def _pieces(response: httpx.Response) -> list[bytes]:
    stream = response.stream
    if isinstance(stream, httpx.AsyncByteStream):
        return [piece async for piece in stream]
    return [response.read()]
