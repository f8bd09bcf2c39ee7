"""A small MCP server for ollm-mcp's tests, built with the SDK's MCPServer.

Run as a script, it serves over stdio (``--http`` prints a port and serves Streamable
HTTP there). Imported, ``build(name)`` gives the server object for in-process tests.

Environment switches, for the failure tests:

- ``DEMO_MODE``: ``normal``; ``crash`` (write to stderr and exit at once); ``hang`` (read
  stdin, never answer); ``slow-exit`` (ignore the end of stdin; only a signal stops it);
- ``DEMO_RECORD``: a file where the server appends what it saw (``started slow``,
  ``cancelled slow``, ``pid N``);
- ``DEMO_STARTED``: a FIFO the ``slow`` tool writes to when it starts (a test waits on it);
- ``DEMO_BANNER``: a line to print on standard output before speaking MCP;
- ``DEMO_TASKS=1``: the ``report`` tool can only be called as an MCP task.
- ``DEMO_CLOCK=1``: a ``time`` tool too.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, Tool, ToolExecution

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def record(line: str) -> None:
    path = os.environ.get("DEMO_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(line + "\n")


class _TaskServer(MCPServer):
    """Lists ``report`` as a tool that can only be called as an MCP task."""

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        required = ToolExecution(task_support="required")
        return [
            t.model_copy(update={"execution": required}) if t.name == "report" else t for t in tools
        ]


def build(
    name: str = "demo",
    *,
    started: Any = None,
    cancelled: Any = None,
    tasks: bool = False,
    clock: bool = False,
) -> MCPServer:
    """The server; ``started`` and ``cancelled`` are anyio events for in-process tests;
    with ``tasks``, it has a ``report`` tool that only task calls may run; with
    ``clock``, a ``time`` tool (named ``current``, it clashes with ``current_time``)."""
    server = _TaskServer(name) if tasks else MCPServer(name)

    if clock:

        @server.tool(name="time")
        def time_now() -> str:
            """The time, as this server tells it."""
            return "the server's time"

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @server.tool()
    def echo(text: str, title: str = "") -> str:
        """Say the text back.

        Args:
            text: What to say.
            title: A title to put first.
        """
        return f"{title}: {text}" if title else text

    @server.tool(structured_output=False)
    def screenshot() -> Image:
        """A one-pixel screenshot."""
        return Image(data=PNG, format="png")

    @server.tool()
    def rows() -> CallToolResult:
        """Structured content only, with no text block."""
        return CallToolResult(content=[], structured_content={"rows": 2, "names": ["a", "b"]})

    @server.tool()
    def refuse(reason: str) -> str:
        """Always fails, with the reason given."""
        raise ToolError(f"refused: {reason}")

    @server.tool()
    async def slow() -> str:
        """Runs until it is cancelled."""
        record("started slow")
        if started is not None:
            started.set()
        fifo = os.environ.get("DEMO_STARTED")
        if fifo:
            await anyio.to_thread.run_sync(_signal_fifo, fifo)
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            record("cancelled slow")
            if cancelled is not None:
                cancelled.set()
            raise
        return "never"

    @server.tool()
    def die() -> str:
        """Exits the server at once, as a crash would."""
        print("demo server: dying on purpose", file=sys.stderr, flush=True)
        os._exit(3)

    @server.tool()
    def search(query: str) -> str:
        """Search; every demo server has this tool."""
        return f"{name} found {query}"

    @server.tool()
    def nested(levels: int) -> CallToolResult:
        """A text, with structured content nested as deep as asked."""
        value: dict[str, Any] = {}
        for _ in range(levels):
            value = {"in": value}
        return CallToolResult(
            content=[TextContent(type="text", text=f"{levels} levels")],
            structured_content=value,
        )

    if tasks:

        @server.tool()
        def report() -> str:
            """A long report, run as an MCP task."""
            return "the report"

    return server


def _signal_fifo(path: str) -> None:
    with open(path, "w", encoding="utf-8") as fifo:
        fifo.write("started\n")


def main() -> None:
    mode = os.environ.get("DEMO_MODE", "normal")
    record(f"pid {os.getpid()}")
    if mode == "crash":
        print("demo server: cannot open the database", file=sys.stderr, flush=True)
        sys.exit(2)
    if mode == "hang":
        fifo = os.environ.get("DEMO_STARTED")
        if fifo:
            _signal_fifo(fifo)
        for _ in sys.stdin:
            pass
        return
    banner = os.environ.get("DEMO_BANNER")
    if banner:
        print(banner, flush=True)
    server = build(
        os.environ.get("DEMO_NAME", "demo"),
        tasks=os.environ.get("DEMO_TASKS") == "1",
        clock=os.environ.get("DEMO_CLOCK") == "1",
    )
    if "--http" in sys.argv:
        _serve_http(server)
        return
    if mode == "slow-exit":
        import signal

        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        server.run("stdio")
        while True:  # the end of stdin does not stop it; SIGTERM does
            signal.pause()
    server.run("stdio")


def _serve_http(server: MCPServer) -> None:
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    # Listening before the port is printed: a client that connects at once waits in the
    # backlog until uvicorn accepts, however long uvicorn takes to start.
    sock.listen()
    print(sock.getsockname()[1], flush=True)
    app: Any = server.streamable_http_app()
    token = os.environ.get("DEMO_TOKEN")
    if token:
        app = _require_token(app, token)
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


def _require_token(app: Any, token: str) -> Any:
    """Answer 401 to a request without ``Authorization: Bearer <token>``."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    main()
