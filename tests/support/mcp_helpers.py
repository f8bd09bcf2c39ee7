"""Helpers for the ollm-mcp tests: where the demo MCP server is, and how to start it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

DEMO = str(Path(__file__).resolve().parent.parent / "mcp" / "servers" / "demo_server.py")


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
