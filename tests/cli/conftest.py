"""Run the installed ``ollm`` console script as a subprocess, against the fake server."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import OLLM, ollm_env

from ollm_testutils import FakeOllamaServer

RunOllm = Callable[..., subprocess.CompletedProcess[str]]
Session = tuple["subprocess.Popen[Any]", int]


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


@pytest.fixture
def interactive() -> Callable[..., contextlib.AbstractContextManager[Session]]:
    """``with interactive("chat", "-p", "echo") as (process, leader):`` runs ``ollm`` with a
    pseudo-terminal as its standard input (write to ``leader`` to type) and its output on
    pipes (``text=False`` for bytes); it is killed at the end if still running."""

    @contextlib.contextmanager
    def start(*args: str, text: bool = True, **env: str) -> Iterator[Session]:
        import pty

        leader, follower = pty.openpty()
        process = subprocess.Popen(
            [OLLM, *args],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=text,
            env=ollm_env(TERM="dumb", **env),
        )
        os.close(follower)
        with process:  # closes the pipes and waits
            try:
                yield process, leader
            finally:
                os.close(leader)
                process.kill()  # (nothing if it has ended)

    return start


@pytest.fixture
def plugin_path(tmp_path: Path) -> Callable[[str, str], str]:
    """``plugin_path("parrot", SOURCE)``: a folder for ``PYTHONPATH`` holding a distribution
    ``ollm-parrot`` 1.0 whose ``ollm.plugins`` entry point ``parrot`` is a module of SOURCE."""

    def make(name: str, source: str) -> str:
        module = f"{name}_plugin_mod"
        (tmp_path / f"{module}.py").write_text(source)
        info = tmp_path / f"ollm_{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ollm-{name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[ollm.plugins]\n{name} = {module}\n")
        return str(tmp_path)

    return make
