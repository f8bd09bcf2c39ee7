"""Run the installed ``ollm`` console script as a subprocess, against the fake server."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Iterator

import pytest
from cli_helpers import OLLM, ollm_env

from ollm_testutils import FakeOllamaServer

RunOllm = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def server() -> Iterator[FakeOllamaServer]:
    with FakeOllamaServer() as fake:
        yield fake


@pytest.fixture
def run_ollm(server: FakeOllamaServer) -> RunOllm:
    """``run_ollm("chat", "-m", "llama3.2", "hi")`` against the fake server."""

    def run(*args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [OLLM, *args],
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            env=ollm_env(OLLAMA_HOST=server.url, **env),
        )

    return run


@pytest.fixture
def closed_port() -> int:
    """A loopback port nobody listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
