"""Ctrl-C twice during a flood: a provider pours text in and ignores the abort (a server
that will not stop, a decompression bomb). The first Ctrl-C asks the chat to stop; the
second quits at once with exit 130, whatever fails on the way out, with no traceback,
and the partial reply is logged."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import flood_provider
import pytest
from cli_helpers import OLLM, installed_plugin, ollm_env

SUPPORT = Path(flood_provider.__file__).parent

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@pytest.mark.parametrize("json_mode", [False, True])
def test_a_second_ctrl_c_during_a_flood_exits_130(tmp_path: Path, json_mode: bool) -> None:
    path = installed_plugin(tmp_path, "flood", "flood_provider", SUPPORT)
    logs = tmp_path / "logs.db"
    process = subprocess.Popen(
        [OLLM, "chat", "-p", "flood", "pour", *(["--json"] if json_mode else [])],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ollm_env(PYTHONPATH=path, OLLM_LOGS_PATH=str(logs)),
    )
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.read(1 << 16)  # the flood is on
    process.send_signal(signal.SIGINT)
    # The first Ctrl-C is heard ("stopping..."), and the flood goes on regardless.
    if not json_mode:
        assert b"stopping" in process.stderr.readline()
    process.stdout.read(1 << 16)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err.decode(errors="replace")[-2000:]
    assert b"Traceback" not in err
    assert b"unexpected" not in err
    listed = subprocess.run(
        [OLLM, "logs", "list", "--json"],
        capture_output=True,
        text=True,
        env=ollm_env(OLLM_LOGS_PATH=str(logs)),
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert '"flood"' in listed.stdout  # the chat was logged, cut short as it was
