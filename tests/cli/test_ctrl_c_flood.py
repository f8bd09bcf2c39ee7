"""Ctrl-C twice during a flood: a provider pours text in and ignores the abort (a server
that will not stop, a decompression bomb). The first Ctrl-C asks the chat to stop; the
second quits at once with exit 130, whatever fails on the way out, with no traceback,
and the partial reply is logged."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

import flood_provider
import pytest
from cli_helpers import OLLM, installed_plugin, ollm_env
from log_helpers import ollm

SUPPORT = Path(flood_provider.__file__).parent

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


class Reader:
    """Reads a pipe to its end in a thread, as a terminal does (a pipe nobody reads fills,
    and the chat would then block on a write of its own, not on Ctrl-C)."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self.data = bytearray()
        self.done = False
        self._grew = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: IO[bytes]) -> None:
        while chunk := pipe.read1(1 << 16):
            with self._grew:
                self.data += chunk
                self._grew.notify_all()
        with self._grew:
            self.done = True
            self._grew.notify_all()

    def wait_for(self, ready: Callable[[bytearray], bool]) -> None:
        """Until ``ready(what was read)`` or the pipe's end; fails after 120 s."""
        with self._grew:
            assert self._grew.wait_for(lambda: ready(self.data) or self.done, 120)

    def close(self) -> bytes:
        self._thread.join(timeout=120)
        return bytes(self.data)


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
    out, err = Reader(process.stdout), Reader(process.stderr)
    try:
        out.wait_for(lambda data: len(data) >= 1 << 16)  # the flood is on
        assert not out.done
        process.send_signal(signal.SIGINT)
        # The first Ctrl-C is heard ("stopping..."). The chat then stops at the next piece
        # the flood yields, or, when it pours too fast for that to show in time, the flood
        # goes on, and the second Ctrl-C quits.
        if not json_mode:
            err.wait_for(lambda data: b"stopping" in data)
        poured = len(out.data)
        out.wait_for(lambda data: len(data) >= poured + (1 << 16))
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    out.close()
    errors = err.close()
    assert process.returncode == 130, errors.decode(errors="replace")[-2000:]
    assert b"Traceback" not in errors
    assert b"unexpected" not in errors
    listed = ollm(logs, "logs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    # the chat was logged, cut short as it was
    assert '"flood"' in listed.stdout, errors.decode(errors="replace")[-2000:]
