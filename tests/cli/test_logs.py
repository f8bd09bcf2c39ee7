"""Conversation logs through the CLI: every chat logged, `-c`/`--cid`, `ollm logs`, and a
damaged, unwritable or busy database never costing the reply."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import OLLM, ollm_env
from log_helpers import listed, ollm

from ollm_testutils import FakeOllamaServer, OllamaReply


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "logs" / "logs.db"


def test_a_chat_is_logged_and_continued_with_its_history(
    db: Path, server: FakeOllamaServer
) -> None:
    server.script(OllamaReply("Nice to meet you, Ada."), OllamaReply("You are Ada."))
    first = ollm(
        db, "chat", "-m", "llama3.2", "-s", "Be brief.", "I am Ada.", OLLAMA_HOST=server.url
    )
    assert first.returncode == 0, first.stderr
    [info] = listed(db)
    assert (info["provider"], info["model"], info["messages"]) == ("ollama", "llama3.2", 2)
    assert info["system"] == "Be brief."
    assert info["preview"] == "I am Ada."
    assert info["prompt_tokens"] > 0

    again = ollm(
        db, "chat", "-c", "Who am I?", OLLAMA_HOST=server.url
    )  # model and system from the log
    assert again.returncode == 0, again.stderr
    assert "You are Ada." in again.stdout
    sent = server.chat_requests[1].json
    assert sent["model"] == "llama3.2"
    assert [m["content"] for m in sent["messages"]] == [
        "Be brief.",
        "I am Ada.",
        "Nice to meet you, Ada.",
        "Who am I?",
    ]
    [info] = listed(db)
    assert info["messages"] == 4


def test_cid_takes_a_prefix_and_show_prints_markdown_and_json(db: Path) -> None:
    for prompt in ("about owls", "about cats"):
        assert ollm(db, "chat", "-p", "echo", prompt).returncode == 0
    owls = next(i for i in listed(db) if i["preview"] == "about owls")
    assert ollm(db, "chat", "-p", "echo", "--cid", owls["id"][:14], "more owls").returncode == 0
    shown = ollm(db, "logs", "show", owls["id"][:14])
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"# Conversation {owls['id']}")
    assert shown.stdout.count("## User") == 2
    assert "more owls" in shown.stdout
    as_json = json.loads(ollm(db, "logs", "show", owls["id"], "--json").stdout)
    assert [m["role"] for m in as_json["messages"]] == ["user", "assistant"] * 2


def test_list_filters_by_model_searches_text_and_removes(db: Path) -> None:
    assert ollm(db, "chat", "-p", "echo", "the Eiffel tower in Paris").returncode == 0
    assert ollm(db, "chat", "-p", "echo", "Oslo in winter").returncode == 0
    assert [i["preview"] for i in listed(db, "-q", "paris")] == ["the Eiffel tower in Paris"]
    assert listed(db, "-q", 'odd "quotes" AND (syntax') == []  # words, never FTS syntax errors
    assert len(listed(db, "-m", "echo")) == 2
    assert listed(db, "-m", "llama3.2") == []
    assert len(listed(db, "-n", "1")) == 1
    oslo = listed(db, "-q", "oslo")[0]["id"]
    removed = ollm(db, "logs", "rm", oslo)
    assert removed.returncode == 0, removed.stderr
    assert [i["preview"] for i in listed(db)] == ["the Eiffel tower in Paris"]
    missing = ollm(db, "logs", "show", oslo)
    assert missing.returncode == 1
    assert "no logged conversation" in missing.stderr


def test_no_log_and_logs_off_write_nothing(db: Path) -> None:
    assert ollm(db, "chat", "-p", "echo", "--no-log", "secret").returncode == 0
    assert ollm(db, "chat", "-p", "echo", "secret", OLLM_LOGS="off").returncode == 0
    assert not db.exists() or listed(db) == []


def test_continue_with_nothing_logged_is_a_clear_error(db: Path) -> None:
    done = ollm(db, "chat", "-p", "echo", "-c", "hi")
    assert done.returncode == 1
    assert "no logged conversation to continue" in done.stderr


def test_a_damaged_database_never_costs_the_reply(db: Path) -> None:
    db.parent.mkdir(parents=True)
    db.write_bytes(os.urandom(4096))
    done = ollm(db, "chat", "-p", "echo", "still answered")
    assert done.returncode == 0
    assert done.stdout.strip() == "still answered"
    assert "is damaged" in done.stderr
    assert "OLLM_LOGS_PATH" in done.stderr
    listing = ollm(db, "logs")
    assert listing.returncode == 1
    assert "is damaged" in listing.stderr
    assert "Traceback" not in listing.stderr + done.stderr


def test_a_database_from_a_newer_ollm_is_refused_clearly(db: Path) -> None:
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as made:
        made.execute("PRAGMA user_version = 99")
    done = ollm(db, "logs")
    assert done.returncode == 1
    assert "newer ollm" in done.stderr


def test_a_locked_database_is_waited_for_then_the_reply_still_prints(db: Path) -> None:
    assert ollm(db, "chat", "-p", "echo", "first").returncode == 0
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        done = ollm(db, "chat", "-p", "echo", "while locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.returncode == 0
    assert done.stdout.strip() == "while locked"
    assert "locked" in done.stderr


def test_concurrent_chats_are_all_logged(db: Path) -> None:
    assert ollm(db, "chat", "-p", "echo", "warm").returncode == 0  # the schema exists
    env = ollm_env(OLLM_LOGS_PATH=str(db))
    processes = [
        subprocess.Popen(
            [OLLM, "chat", "-p", "echo", f"parallel {n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        for n in range(6)
    ]
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    previews = {i["preview"] for i in listed(db, "-n", "20")}
    assert previews >= {f"parallel {n}" for n in range(6)}


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_an_interactive_session_is_logged_as_it_goes(db: Path, server: FakeOllamaServer) -> None:
    """Killed after its first answer, the session has already logged it."""
    import pty

    server.script(OllamaReply("Hello, Ada."))
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [OLLM, "chat", "-m", "llama3.2"],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ollm_env(OLLAMA_HOST=server.url, TERM="dumb", OLLM_LOGS_PATH=str(db)),
    )
    os.close(follower)
    try:
        os.write(leader, b"I am Ada.\n")
        deadline = time.monotonic() + 30
        while not (db.exists() and listed(db) and listed(db)[0]["messages"] == 2):
            assert time.monotonic() < deadline, "the first answer was never logged"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        os.close(leader)
        process.kill()
    [info] = listed(db)
    assert info["preview"] == "I am Ada."
    shown = ollm(db, "logs", "show", info["id"])
    assert "Hello, Ada." in shown.stdout


def test_logs_path_says_where(db: Path) -> None:
    done = ollm(db, "logs", "path")
    assert done.stdout.strip() == str(db)
