"""The conversation log is private: its folder ``0700``, the database and its ``-wal`` and
``-shm`` files ``0600``, whatever the umask; a log others may read is warned about once."""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ollm
from ollm.logs import LogStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o000, 0o022, 0o077, 0o277])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The process's umask for the test (0o277 would even take the owner's write away)."""
    old = os.umask(request.param)
    try:
        yield int(request.param)
    finally:
        os.umask(old)


def test_a_new_log_is_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "data" / "ollm" / "logs.db"
    with LogStore(path) as store:
        store.save(ollm.Conversation([ollm.Message.user("a secret")]))
        # While it is open, SQLite keeps its write-ahead log and shared memory beside it.
        wal, shm = path.with_name("logs.db-wal"), path.with_name("logs.db-shm")
        assert (mode(path.parent), mode(path), mode(wal), mode(shm)) == (
            0o700,
            0o600,
            0o600,
            0o600,
        )
        assert store.exposure is None


def test_an_existing_folder_is_left_as_it_is(tmp_path: Path) -> None:
    """OLLM_LOGS_PATH may point into a folder of the user's: only the file is ollm's."""
    tmp_path.chmod(0o755)
    with LogStore(tmp_path / "logs.db") as store:
        assert store.exposure is None
    assert mode(tmp_path) == 0o755
    assert mode(tmp_path / "logs.db") == 0o600


def test_a_log_others_may_read_is_warned_about_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "logs.db"
    LogStore(path).close()
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="ollm.logs"):
        for readonly in (False, True, False, True):
            with LogStore(path, readonly=readonly) as store:
                assert store.exposure is not None
                assert str(path) in store.exposure
                assert "logs.db is 0644" in store.exposure
                assert f"chmod 600 {path}*" in store.exposure
    [record] = caplog.records  # once per process
    assert record.getMessage().startswith(f"the conversation log {path} is not private")
    assert mode(path) == 0o644  # reported, never changed


def test_ollms_own_folder_open_to_others_is_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OLLM_LOGS_PATH", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with LogStore() as store:
        folder = store.path.parent
        assert folder.name == "ollm"
        assert mode(folder) == 0o700
        assert store.exposure is None
    folder.chmod(0o755)
    with LogStore() as store:
        assert store.exposure is not None
        assert "its folder is 0755" in store.exposure
        assert f"chmod 700 {folder}" in store.exposure
