"""Helpers for running the installed ``ollm`` console script in tests.

``OLLM`` is what tests run as ``ollm``: the client of this worker's fork server
(fork_server.py), which runs the console script's function in a process forked from one
that has already imported ollm, as the real command would run it, at a fraction of the
start-up. ``OLLM_REAL`` is the console script itself, for the tests of the start-up
(what it imports, how it finds plugins). ``OLLM_TEST_REAL_CLI=1`` makes ``OLLM`` the real
one too; so does a ``PYTHONPATH`` of the test session (tests/mutate.py plants bugs in a
copy of the code on it, which the server, importing ollm once, would not see changed).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

OLLM_REAL = str(Path(sys.executable).with_name("ollm"))
SUPPORT = Path(__file__).resolve().parent
# `ollm chat` logs conversations: in tests, to a database of the test run, never the user's.
TEST_LOGS = str(Path(tempfile.mkdtemp(prefix="ollm-test-logs-")) / "logs.db")


def ollm_env(**extra: str) -> dict[str, str]:
    """A clean environment for the CLI: no colour, no user defaults."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OLLM_", "OLLAMA_", "OPENAI_", "GEMINI_", "GOOGLE_", "ANTHROPIC_"))
    }
    env.update({"NO_COLOR": "1", "PYTHONUNBUFFERED": "1", "OLLM_LOGS_PATH": TEST_LOGS})
    env.update(extra)
    return env


def installed_plugin(folder: Path, name: str, module: str, support: Path) -> str:
    """A PYTHONPATH on which the module ``module`` (in ``support``) is the installed plugin
    ``name``, of the distribution ``ollm-NAME`` 1.0 (its metadata written in ``folder``)."""
    info = folder / f"ollm_{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ollm-{name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[ollm.plugins]\n{name} = {module}\n")
    return f"{folder}:{support}"


_server: subprocess.Popen[bytes] | None = None
_client: str | None = None
_starting = threading.Lock()  # the docs' tests start documents in threads


def fork_server_on() -> bool:
    """Whether ``OLLM`` is the fork server's client (Linux only: it uses pidfds)."""
    return (
        sys.platform == "linux"
        and os.environ.get("OLLM_TEST_REAL_CLI", "") in ("", "0")
        and not os.environ.get("PYTHONPATH")
    )


def start_fork_server() -> str:
    """The client of this process's fork server, started on first use."""
    global _server, _client
    with _starting:
        if _client is None:
            _client = _start()
    return _client


def _start() -> str:
    global _server
    folder = Path(tempfile.mkdtemp(prefix="ollm-fork-"))
    client = folder / "ollm"  # named as the command: argparse and shells show it
    client.write_text(f"#!{sys.executable} -IS\n" + (SUPPORT / "fork_client.py").read_text())
    client.chmod(0o755)
    # OLLM_FORK_SERVER: a variable the child must not see (its environment is the
    # client's alone: tests/test_fork_server.py checks).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OLLM_FORK_SERVER"] = str(folder)
    server = [sys.executable, str(SUPPORT / "fork_server.py"), str(folder / "server.sock")]
    with (folder / "server.log").open("wb") as log:
        _server = subprocess.Popen(
            [*server, OLLM_REAL],
            stdin=subprocess.PIPE,  # closed when this process ends: the server ends
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=folder,
            env=env,
        )
    assert _server.stdout is not None
    _server.stdout.readline()  # listening (or gone: the client then runs the real one)
    atexit.register(stop_fork_server)
    return str(client)


def stop_fork_server() -> None:
    """Stop this process's fork server (at the session's end), if it was started."""
    global _server, _client
    if _server is not None:
        _server.terminate()
        _server.wait(timeout=60)
        for pipe in (_server.stdin, _server.stdout):
            if pipe is not None:
                pipe.close()
    if _client is not None:
        shutil.rmtree(Path(_client).parent, ignore_errors=True)
    _server = _client = None


def __getattr__(name: str) -> str:
    # ``OLLM`` is computed when first imported, so that a session using only ollm_env
    # starts no server.
    if name == "OLLM":
        return start_fork_server() if fork_server_on() else OLLM_REAL
    raise AttributeError(name)
