"""Running ``ollm`` against a conversation log of the test's own, and reading it back."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cli_helpers import OLLM, OLLM_REAL, ollm_env


def ollm(
    db: Path | None,
    *args: str,
    stdin: str | None = None,
    run: Mapping[str, Any] | None = None,
    command: str | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """``ollm ARGS`` logging to ``db`` (``None``: as ``env`` says), with ``stdin`` as its
    input (none by default), ``env`` added to a clean environment, and ``run`` given to
    ``subprocess.run`` (``umask``, ``preexec_fn``...); ``command``: what runs as ``ollm``
    (``OLLM`` by default)."""
    if db is not None:
        env.setdefault("OLLM_LOGS_PATH", str(db))
    # A preexec_fn changes the process started (its capabilities, its limits): the fork
    # server's child is not that process, so the real ollm runs.
    if command is None:
        command = OLLM_REAL if run and "preexec_fn" in run else OLLM
    return subprocess.run(
        [command, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=ollm_env(**env),
        **(run or {}),
    )


def listed(db: Path, *args: str) -> list[dict[str, Any]]:
    """``ollm logs --json ARGS``: the conversations, latest first."""
    done = ollm(db, "logs", *args, "--json")
    assert done.returncode == 0, done.stderr
    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result


def shown(db: Path, cid: str) -> dict[str, Any]:
    """``ollm logs show CID --json``: the conversation, its messages and responses."""
    done = ollm(db, "logs", "show", cid, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def texts(db: Path, cid: str) -> list[str]:
    """The text of each message of the conversation ``cid``, in order."""
    return [m["parts"][0]["text"] if m["parts"] else "" for m in shown(db, cid)["messages"]]


def latest(db: Path) -> dict[str, Any]:
    """The conversation written to last, as ``shown`` gives it."""
    return shown(db, listed(db, "-n", "1")[0]["id"])
