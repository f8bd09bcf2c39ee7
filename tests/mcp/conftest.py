"""Fixtures for ollm-mcp: the demo MCP server (in process, as a subprocess, over HTTP)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from mcp_helpers import DEMO

WriteServers = Callable[..., Path]


@pytest.fixture(scope="session")
def demo() -> ModuleType:
    """The demo server's module (``demo.build(name)`` makes a server object)."""
    spec = importlib.util.spec_from_file_location("ollm_mcp_demo_server", DEMO)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def write_servers(tmp_path: Path) -> WriteServers:
    """``write_servers(git=mcp_helpers.stdio_entry("git"), ...)``: an mcpServers file."""

    def write(**servers: dict[str, Any]) -> Path:
        path = tmp_path / "servers.json"
        path.write_text(json.dumps({"mcpServers": servers}))
        return path

    return write


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """The demo server over Streamable HTTP, in a subprocess; its URL. It wants the header
    ``Authorization: Bearer demo``."""
    process = subprocess.Popen(
        [sys.executable, DEMO, "--http"],
        stdout=subprocess.PIPE,
        text=True,
        env={**_base_env(), "DEMO_TOKEN": "demo", "DEMO_NAME": "web"},
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _base_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("DEMO_")}
