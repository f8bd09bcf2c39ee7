"""An interactive ``ollm chat`` logs each message once, as it goes, and its log recovers
when a lock that made one write fail is gone: nothing lost, nothing twice."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest
from cli_helpers import ollm_env
from cli_session import InteractiveOllm
from log_helpers import latest, ollm, texts

from ollm_testutils import FakeOllamaServer, OllamaReply

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")

PROMPT = "> "  # printed once the last answer is drawn and logged


def test_each_message_is_logged_once_and_c_sends_it_once(
    tmp_path: Path, server: FakeOllamaServer
) -> None:
    db = tmp_path / "logs.db"
    server.script(OllamaReply("Hello, Ada."), OllamaReply("You are Ada."), OllamaReply("Yes."))
    env = ollm_env(OLLAMA_HOST=server.url, OLLM_LOGS_PATH=str(db))
    with InteractiveOllm(["chat", "-m", "llama3.2"], env) as session:
        session.out.wait_for(PROMPT)
        session.send("I am Ada.")
        session.out.wait_for(PROMPT, count=2)
        session.send("Who am I?")
        session.out.wait_for(PROMPT, count=3)
        assert session.exit() == 0, session.err.text
    conversation = latest(db)
    assert texts(db, conversation["conversation"]["id"]) == [
        "I am Ada.",
        "Hello, Ada.",
        "Who am I?",
        "You are Ada.",
    ]
    assert len(conversation["responses"]) == 2

    again = ollm(db, "chat", "-c", "Sure?", OLLAMA_HOST=server.url)
    assert again.returncode == 0, again.stderr
    assert [m["content"] for m in server.chat_requests[2].json["messages"]] == [
        "I am Ada.",
        "Hello, Ada.",
        "Who am I?",
        "You are Ada.",
        "Sure?",
    ]


def test_a_write_that_met_a_lock_is_caught_up_once_the_lock_is_gone(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    assert ollm(db, "chat", "-p", "echo", "an earlier chat").returncode == 0  # the log exists
    holder = sqlite3.connect(db, isolation_level=None)
    # The session gives up on a busy log at once: the test holds the lock until it has.
    env = ollm_env(OLLM_LOGS_PATH=str(db), OLLM_LOGS_BUSY_TIMEOUT="0")
    try:
        with InteractiveOllm(["chat", "-p", "echo"], env) as session:
            session.out.wait_for(PROMPT)
            holder.execute("BEGIN IMMEDIATE")
            session.send("first question")
            session.err.wait_for("this answer is not logged")
            holder.execute("ROLLBACK")
            session.send("second question")
            session.out.wait_for(PROMPT, count=3)
            assert session.exit() == 0, session.err.text
    finally:
        holder.close()
    err = session.err.text
    assert "stayed locked by another program" in err
    assert "OLLM_LOGS_PATH=" in err
    assert "OLLM_LOGS=off" in err
    assert "ollm_logs" not in err
    assert err.count("this answer is not logged") == 1
    assert "the conversation log works again: 2 answers logged" in err
    conversation = latest(db)
    assert texts(db, conversation["conversation"]["id"]) == [
        "first question",
        "first question",
        "second question",
        "second question",
    ]
    assert len(conversation["responses"]) == 2
