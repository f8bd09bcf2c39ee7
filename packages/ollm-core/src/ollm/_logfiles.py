"""The conversation log's files: created private, checked for exposure, opened.

Private to ``ollm.logs``. The log holds every prompt and answer, so it is treated as ssh
and gpg treat private data: ollm's folder is created ``0700`` and the database ``0600``
whatever the umask (SQLite gives its ``-wal`` and ``-shm`` files the database's mode).
A database (or ollm's own folder) that others may read is reported, never changed.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from pathlib import Path

__all__ = ["connect", "create_private", "exposure", "open_read_only"]

_PRIVATE_DIR = 0o700
_PRIVATE_FILE = 0o600
_SIDE_FILES = ("-wal", "-shm")
_POSIX = os.name == "posix"


def create_private(path: Path) -> None:
    """Create ``path``'s folder (``0700``) and an empty database file (``0600``) if missing."""
    folder = path.parent
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir(mode=_PRIVATE_DIR)
        except FileExistsError:
            pass  # another process made it meanwhile
        else:
            if _POSIX:
                os.chmod(folder, _PRIVATE_DIR)  # the umask narrowed mkdir's mode; this is exact
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE_FILE)
    except FileExistsError:
        return
    try:
        if _POSIX:
            os.fchmod(fd, _PRIVATE_FILE)
    finally:
        os.close(fd)


def exposure(path: Path, *, folder: bool) -> str | None:
    """A one-line warning when others may read the database (or, with ``folder``, its
    folder); ``None`` when it is private, missing, or on a system without modes."""
    if not _POSIX:
        return None
    wide: list[str] = []
    for file in (path, *(path.with_name(path.name + side) for side in _SIDE_FILES)):
        mode = _mode(file)
        if mode is not None and mode & 0o077:
            wide.append(f"{file.name} is {mode:04o}")
    folder_mode = _mode(path.parent) if folder else None
    if folder_mode is not None and folder_mode & 0o077:
        wide.insert(0, f"its folder is {folder_mode:04o}")
    if not wide:
        return None
    fix = f"chmod 600 {path}*"
    if folder_mode is not None and folder_mode & 0o077:
        fix = f"chmod 700 {path.parent} && {fix}"
    return (
        f"the conversation log {path} is not private ({', '.join(wide)}): other users "
        f"of this machine may read it. Make it private with: {fix}"
    )


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None


def connect(path: Path, timeout: float) -> sqlite3.Connection:
    """The database, for reading and writing."""
    return sqlite3.connect(path, timeout=timeout, isolation_level=None)


def open_read_only(path: Path, timeout: float) -> sqlite3.Connection:
    """The database opened read-only, even from a folder that cannot be written.

    A WAL database needs its ``-shm`` file; where it cannot be made, the file is read
    as immutable (nothing else can write there either).
    """
    uri = path.resolve().as_uri()
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout, isolation_level=None)
    try:
        db.execute("PRAGMA user_version").fetchone()
    except sqlite3.OperationalError:
        with contextlib.suppress(sqlite3.Error):
            db.close()
        db = sqlite3.connect(
            f"{uri}?mode=ro&immutable=1", uri=True, timeout=timeout, isolation_level=None
        )
    return db
