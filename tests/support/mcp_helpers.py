"""Helpers for the ollm-mcp tests: where the demo MCP server is, and how to start it."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio

SERVERS = Path(__file__).resolve().parent.parent / "mcp" / "servers"
DEMO = str(SERVERS / "demo_server.py")
RAW = str(SERVERS / "raw_server.py")
"""An MCP server written by hand (protocol 2025-11-25, its own key order)."""

DEADLOCK = 60
"""Seconds after which a test that should long have ended is taken to hang: a guard only."""

STARTUP_TIMEOUTS = (0.5, 1, 2, 4, 8, 16, 32)
"""Start-up timeouts, one per attempt, for a test whose server must get somewhere (record
its process id, write a line) before ollm gives up on it: a busy machine makes such a
test try again with twice the time, never fail."""


def stdio_entry(name: str = "demo", **env: str) -> dict[str, Any]:
    """A stdio entry of an mcpServers file that starts the demo server as ``name``."""
    return {"command": sys.executable, "args": [DEMO], "env": {"DEMO_NAME": name, **env}}


def pids(record: Path) -> list[int]:
    """The process ids the demo server wrote to its ``DEMO_RECORD`` file."""
    lines = record.read_text().splitlines() if record.exists() else []
    return [int(line.split()[1]) for line in lines if line.startswith("pid ")]


def gone(pid: int) -> bool:
    """Exited and reaped: even a zombie (exited, not reaped) still answers signal 0."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def wait_until_gone(pid: int) -> None:
    """Wait until the process has exited and been reaped (bounded by ``DEADLOCK``).

    For a server that stopped on its own: whoever started it reaps it in the background,
    and nothing tells the test when; polling is the event here.
    """
    with anyio.fail_after(DEADLOCK):
        while not gone(pid):
            await anyio.sleep(0.01)


def assert_details_only_in_debug(records: list[logging.LogRecord]) -> None:
    """Nothing a user sees by default was logged, and the SDK's details (a traceback) are
    in the debug log, for ``--debug``."""
    assert [r.getMessage() for r in records if r.levelno >= logging.WARNING] == []
    assert any(r.exc_info for r in records if r.name.startswith("ollm_mcp"))
