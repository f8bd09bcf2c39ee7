"""Two ``ollm chat -c`` at once on one conversation: the second writer finds it moved on
and logs its exchange as a new conversation branching from the shared point."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from cli_helpers import OLLM, ollm_env
from cli_session import OutputReader
from log_helpers import listed, ollm, texts


def test_two_continuations_at_once_fork_the_conversation(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    assert ollm(db, "chat", "-p", "echo", "shared start").returncode == 0
    [shared] = listed(db)

    # The test holds the log's write lock while both start, load the conversation and
    # answer (the echo prints the prompt back): neither can write before both have read.
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    env = ollm_env(OLLM_LOGS_PATH=str(db), OLLM_LOGS_BUSY_TIMEOUT="600")
    processes = {
        name: subprocess.Popen(
            [OLLM, "chat", "-c", f"branch {name}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for name in ("one", "two")
    }
    try:
        outputs = {}
        for name, process in processes.items():
            assert process.stdout is not None
            assert process.stderr is not None
            outputs[name] = (OutputReader(process.stdout), OutputReader(process.stderr))
            outputs[name][0].wait_for(f"branch {name}")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    for name, process in processes.items():
        assert process.wait(timeout=120) == 0, outputs[name][1].wait_for("")

    found = {c["id"]: c for c in listed(db)}
    assert len(found) == 2
    [fork] = [c for c in found.values() if c["id"] != shared["id"]]
    assert (fork["forked_from"], fork["forked_at"]) == (shared["id"], 2)
    first = texts(db, shared["id"])
    second = texts(db, fork["id"])
    assert first[:2] == second[:2] == ["shared start", "shared start"]
    # Each keeps one branch whole; neither holds the other's.
    assert {tuple(first[2:]), tuple(second[2:])} == {
        ("branch one", "branch one"),
        ("branch two", "branch two"),
    }
    notes = [err.wait_for("") for _, err in outputs.values()]
    [note] = [n for n in notes if "went on with conversation" in n]
    assert shared["id"] in note
    assert fork["short_id"] in note

    # The next -c goes on with the fork, the conversation written to last.
    again = ollm(db, "chat", "-c", "and on")
    assert again.returncode == 0, again.stderr
    assert texts(db, fork["id"]) == [*second, "and on", "and on"]
    assert texts(db, shared["id"]) == first
