"""The log through the CLI: created private whatever the umask, a log others may read
warned about in one line, and read by ``ollm logs`` from a folder it cannot write."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from log_helpers import ollm

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_the_log_is_created_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    home = tmp_path / "home"
    env = {"OLLM_LOGS_PATH": "", "HOME": str(home), "XDG_DATA_HOME": str(home / "data")}
    done = ollm(None, "chat", "-p", "echo", "a secret", run={"umask": umask}, **env)
    assert done.returncode == 0, done.stderr
    db = Path(ollm(None, "logs", "path", **env).stdout.strip())
    assert db.is_relative_to(home)
    assert (mode(db.parent), mode(db)) == (0o700, 0o600)
    assert "not private" not in done.stderr


def test_a_log_others_may_read_is_one_warning_line(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    assert ollm(db, "chat", "-p", "echo", "hello").returncode == 0
    db.chmod(0o644)
    for args in (("logs",), ("chat", "-p", "echo", "again"), ("logs", "--json")):
        done = ollm(db, *args)
        [warning] = [line for line in done.stderr.splitlines() if "not private" in line]
        assert warning.startswith(
            f"warning: the conversation log {db} is not private (logs.db is 0644"
        )
        assert warning.endswith(
            f"other users of this machine may read it. Make it private with: chmod 600 {db}*"
        )
    assert mode(db) == 0o644


def _without_root_powers() -> None:
    """In the child, before ollm starts: root loses the capabilities that let it ignore
    file modes (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER), as any user is."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2, 3):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "cannot drop root's capabilities")


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """A folder, and how to run ``ollm`` so that modes bind it (root ignores them)."""
    user: dict[str, Any] = {}
    if os.geteuid() == 0:
        if not sys.platform.startswith("linux"):
            pytest.skip("as root, file modes bind only where capabilities can be dropped")
        user = {"preexec_fn": _without_root_powers}
    folder = tmp_path / "logs"
    folder.mkdir()
    try:
        yield folder, user
    finally:
        folder.chmod(0o700)


def test_logs_are_read_from_a_folder_that_cannot_be_written(
    reader: tuple[Path, dict[str, Any]],
) -> None:
    folder, user = reader
    db, home = folder / "logs.db", str(folder.parent)
    written = ollm(db, "chat", "-p", "echo", "kept for reading", run=user, HOME=home)
    assert written.returncode == 0, written.stderr
    db.chmod(0o400)
    folder.chmod(0o500)

    listing = ollm(db, "logs", "--json", run=user, HOME=home)
    assert listing.returncode == 0, listing.stderr
    [info] = json.loads(listing.stdout)
    assert info["preview"] == "kept for reading"
    shown = ollm(db, "logs", "show", info["short_id"], run=user, HOME=home)
    assert shown.returncode == 0, shown.stderr
    assert "kept for reading" in shown.stdout
    # Writing still fails in words, and costs no reply.
    chat = ollm(db, "chat", "-p", "echo", "not logged", run=user, HOME=home)
    assert chat.returncode == 0
    assert chat.stdout.strip() == "not logged"
    assert "not logged:" in chat.stderr
    assert "Traceback" not in listing.stderr + shown.stderr + chat.stderr
    assert sorted(os.listdir(folder)) == ["logs.db"]
