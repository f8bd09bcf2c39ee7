"""Approval policy files that cannot be read or understood, each made in a folder, with
words its ``PolicyError`` says: for the API's tests and the command line's."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def missing(tmp: Path) -> Path:
    return tmp / "no" / "such.toml"


def fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "fifo.toml")  # no writer comes: opening it must not wait for one
    return tmp / "fifo.toml"


def folder(tmp: Path) -> Path:
    (tmp / "dir.toml").mkdir()
    return tmp / "dir.toml"


def dangling(tmp: Path) -> Path:
    (tmp / "link.toml").symlink_to(tmp / "gone.toml")
    return tmp / "link.toml"


def loop(tmp: Path) -> Path:
    (tmp / "a.toml").symlink_to(tmp / "b.toml")
    (tmp / "b.toml").symlink_to(tmp / "a.toml")
    return tmp / "a.toml"


def too_large(tmp: Path) -> Path:
    path = tmp / "big.toml"
    path.write_text('default = "allow"\n' + "# padding\n" * 120_000)
    return path


def not_utf8(tmp: Path) -> Path:
    path = tmp / "latin.toml"
    path.write_bytes(b'default = "allow"\n# \xff\xfe\n')
    return path


def not_toml(tmp: Path) -> Path:
    (tmp / "bad.toml").write_text("default = \n")
    return tmp / "bad.toml"


def unknown_key(tmp: Path) -> Path:
    (tmp / "odd.toml").write_text('[[rules]]\naction = "deny"\npath = "/etc/*"\n')
    return tmp / "odd.toml"


UNREADABLE: list[tuple[Callable[[Path], Path], str]] = [
    (missing, "does not exist"),
    (fifo, "is not a regular file (a FIFO"),
    (folder, "is a folder, not a file"),
    (dangling, "does not exist (or is a symbolic link to nothing)"),
    (loop, "cannot be opened (Too many levels of symbolic links)"),
    (too_large, "is larger than 1 MiB"),
    (not_utf8, "is not UTF-8 text"),
]
"""Files that cannot be read, and what their error says."""

NOT_A_POLICY: list[tuple[Callable[[Path], Path], str]] = [
    (not_toml, "is not valid TOML"),
    (unknown_key, "rule 1 has 'path'; a rule takes action"),
]
"""Files read but not understood, and what their error says."""
