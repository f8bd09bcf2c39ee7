"""A log written by ollm's first schema (version 1) is migrated, its ids keep working and
get short forms; ``readonly=True`` reads it (or a folder it cannot write) changing nothing.
A log of version 2 (before tool-call decisions were logged) is migrated to the current
version (5: decisions, typed output, then compactions); one of version 4 gets compactions."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import msgspec
import pytest

import ollm
from ollm.logs import LogStore, LogsUnavailableError

# The schema as ollm wrote it at version 1 (ids started with their time, in hex).
VERSION_1 = """
CREATE TABLE conversations (
    id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    provider TEXT, model TEXT, system TEXT);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, message BLOB NOT NULL,
    created_at TEXT NOT NULL, UNIQUE (conversation_id, seq));
CREATE TABLE responses (
    id INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL, provider TEXT, model TEXT, finish_reason TEXT,
    prompt_tokens INTEGER, completion_tokens INTEGER, total_tokens INTEGER,
    duration_ms REAL, error_code TEXT, error_message TEXT);
CREATE INDEX conversations_by_update ON conversations(updated_at);
CREATE INDEX responses_by_conversation ON responses(conversation_id);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id');
CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
    VALUES ('delete', old.id, old.content);
END;
PRAGMA user_version = 1;
"""
OLD = ("0641f3a2b1c4d5e6f7a8", "0641f3a2b1c4d5aaaaaa")  # a microsecond apart, in effect


def version_1_log(path: Path) -> None:
    """Two conversations as version 1 logged them; the first failed after its answer, then
    refused a prompt too long."""
    with sqlite3.connect(path) as db:
        db.executescript(VERSION_1)
        for n, cid in enumerate(OLD):
            when = f"2025-01-0{n + 1}T10:00:00.000000+00:00"
            db.execute(
                "INSERT INTO conversations VALUES (?, ?, ?, 'ollama', 'llama3.2', NULL)",
                (cid, when, when),
            )
            for seq, message in enumerate(
                [ollm.Message.user(f"question {n}"), ollm.Message.assistant(f"answer {n}")]
            ):
                db.execute(
                    "INSERT INTO messages (conversation_id, seq, role, content, message, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (cid, seq, message.role, message.text, msgspec.json.encode(message), when),
                )
        db.execute(
            "INSERT INTO responses (conversation_id, created_at, finish_reason, error_code, "
            "error_message) VALUES (?, '2025-01-01T11:00:00.000000+00:00', 'error', "
            "'STREAM_INTERRUPTED', 'The reply was cut.')",
            (OLD[0],),
        )
        # Then a prompt refused as too long, which version 1 logged whole.
        refused = ollm.Message.user("word " * 2000)
        db.execute(
            "INSERT INTO messages (conversation_id, seq, role, content, message, created_at) "
            "VALUES (?, 2, 'user', ?, ?, '2025-01-01T12:00:00.000000+00:00')",
            (OLD[0], refused.text, msgspec.json.encode(refused)),
        )
        db.execute(
            "INSERT INTO responses (conversation_id, created_at, finish_reason, error_code) "
            "VALUES (?, '2025-01-01T12:00:01.000000+00:00', 'token_limit', 'TOKEN_LIMIT')",
            (OLD[0],),
        )


def test_a_version_1_log_is_migrated_and_its_ids_keep_working(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    version_1_log(path)
    with LogStore(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == 5
        # The refused prompt left the history (-c would send it again), kept whole.
        assert [m.text for m in store.load(OLD[0]).messages] == ["question 0", "answer 0"]
        responses = store.responses(OLD[0][:15])
        assert [(r.error_code, r.messages_after) for r in responses] == [
            ("STREAM_INTERRUPTED", 2),
            (None, 2),  # the prompt, where it came
            ("TOKEN_LIMIT", 2),
        ]
        unanswered = responses[1].unanswered
        assert unanswered is not None
        assert unanswered == "word " * 2000
        with pytest.raises(LogsUnavailableError, match="several"):
            store.resolve(OLD[0][:10])
        # Old ids share their first characters: their short forms are as long as needed.
        shorts = {i.id: i.short_id for i in store.list()}
        assert shorts == {OLD[0]: OLD[0][:15], OLD[1]: OLD[1][:15]}
        # New ids are random from the first character: six of them name one.
        new = [store.log_exchange(None, [ollm.Message.user(f"new {n}")]) for n in range(30)]
        infos = {i.id: i for i in store.list(limit=100)}
        assert all(infos[cid].short_id == cid[:6] for cid in new)
        assert len({i.short_id for i in infos.values()}) == 32
        for info in infos.values():
            assert store.resolve(info.short_id) == info.id
        # The migrated conversation goes on, and forks, like a new one.
        assert store.log_exchange(OLD[1], [ollm.Message.user("more")], base=2) == OLD[1]
        fork = store.log_exchange(OLD[1], [ollm.Message.user("other")], base=2)
        assert [m.text for m in store.load(fork).messages] == ["question 1", "answer 1", "other"]
        assert store.info(fork).forked_from == OLD[1]


# What version 2 added to version 1.
VERSION_2 = (
    VERSION_1.replace("PRAGMA user_version = 1;", "")
    + """
ALTER TABLE conversations ADD COLUMN forked_from TEXT;
ALTER TABLE conversations ADD COLUMN forked_at INTEGER;
ALTER TABLE responses ADD COLUMN messages_after INTEGER;
ALTER TABLE responses ADD COLUMN unanswered TEXT;
PRAGMA user_version = 2;
"""
)
V2 = "q5xkq2nqzkc3tbeg"


def version_2_log(path: Path) -> None:
    """A conversation as version 2 logged it: a call, its result and the answer."""
    call = ollm.ToolCall("call_1", "launch", {"target": "moon"})
    history = [
        ollm.Message.user("launch"),
        ollm.Message.assistant(tool_calls=(call,)),
        ollm.Message.tool("launched", call=call),
        ollm.Message.assistant("Done."),
    ]
    when = "2025-06-01T10:00:00.000000+00:00"
    with sqlite3.connect(path) as db:
        db.executescript(VERSION_2)
        db.execute(
            "INSERT INTO conversations (id, created_at, updated_at, provider, model) "
            "VALUES (?, ?, ?, 'ollama', 'qwen3')",
            (V2, when, when),
        )
        for seq, message in enumerate(history):
            db.execute(
                "INSERT INTO messages (conversation_id, seq, role, content, message, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (V2, seq, message.role, message.text, msgspec.json.encode(message), when),
            )
        db.execute(
            "INSERT INTO responses (conversation_id, created_at, finish_reason, messages_after) "
            "VALUES (?, ?, 'stop', 4)",
            (V2, when),
        )


def test_a_version_2_log_is_migrated_and_logs_decisions(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    version_2_log(path)
    with LogStore(path, readonly=True) as store:  # read through a migrated copy
        assert store.decisions(V2) == []
        assert len(store.load(V2).messages) == 4
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2  # left as it was
    with LogStore(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == 5
        assert [m.role for m in store.load(V2).messages] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        assert [r.finish_reason for r in store.responses(V2)] == ["stop"]
        # Version 4's typed output: none in an older response.
        assert [(r.output_schema, r.output) for r in store.responses(V2)] == [(None, None)]
        call = ollm.ToolCall("call_2", "launch", {"target": "mars"})
        decision = ollm.ToolDecisionEvent(call, "deny", "person", "not this year", id="q1")
        store.log_exchange(
            V2,
            [ollm.Message.user("and mars?"), ollm.Message.assistant(tool_calls=(call,))],
            base=4,
            decisions=[decision],
        )
        [logged] = store.decisions(V2)
    assert (logged.tool, logged.decision, logged.by, logged.reason, logged.call_id) == (
        "launch",
        "deny",
        "person",
        "not this year",
        "call_2",
    )
    assert (logged.args, logged.messages_after, logged.scope) == ('{"target":"mars"}', 6, "once")


# What versions 3 and 4 added, as they added it.
VERSION_3_AND_4 = """
CREATE TABLE decisions (
    id INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    created_at TEXT NOT NULL, messages_after INTEGER, call_id TEXT, tool TEXT NOT NULL,
    args TEXT, decision TEXT NOT NULL, decided_by TEXT, reason TEXT, scope TEXT);
CREATE INDEX decisions_by_conversation ON decisions(conversation_id);
ALTER TABLE responses ADD COLUMN output_schema TEXT;
ALTER TABLE responses ADD COLUMN output TEXT;
PRAGMA user_version = 4;
"""


def test_a_version_4_log_is_migrated_and_logs_compactions(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    version_2_log(path)
    with sqlite3.connect(path) as db:
        db.executescript(VERSION_3_AND_4)
    with LogStore(path, readonly=True) as store:  # read through a migrated copy
        assert store.compactions(V2) == []
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 4  # left as it was
    with LogStore(path) as store:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == 5
        assert store.compactions(V2) == []
        assert len(store.load(V2).messages) == 4
        trim = ollm.CompactionEvent("trim", 2, 7900, 3100)
        clear = ollm.CompactionEvent("clear-results", 1, 3100, 2000)
        store.log_exchange(
            V2,
            [ollm.Message.user("and mars?"), ollm.Message.assistant("Not yet.")],
            base=4,
            compactions=[(1, trim), (2, clear)],  # after the question, then the answer
        )
        logged = store.compactions(V2)
    assert [
        (c.strategy, c.removed, c.tokens_before, c.tokens_after, c.messages_after) for c in logged
    ] == [("trim", 2, 7900, 3100, 5), ("clear-results", 1, 3100, 2000, 6)]


def test_reading_a_version_1_log_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    version_1_log(path)
    before = path.read_bytes()
    with LogStore(path, readonly=True) as store:
        assert [i.preview for i in store.list()] == ["question 1", "question 0"]
        assert store.responses(OLD[0])[0].error_code == "STREAM_INTERRUPTED"
        assert len(store.load(OLD[0]).messages) == 2  # the migrated copy's
        with pytest.raises(LogsUnavailableError):
            store.log_exchange(None, [ollm.Message.user("no")])
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["logs.db"]


def test_reading_a_log_that_is_not_there_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "none" / "logs.db"
    with LogStore(path, readonly=True) as store:
        assert store.list() == []
        assert store.latest() is None
        with pytest.raises(LogsUnavailableError, match="no logged conversation"):
            store.info("abcdef")
    assert not path.parent.exists()


def test_a_log_from_a_newer_ollm_is_refused_when_reading_too(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    for readonly in (False, True):
        with pytest.raises(LogsUnavailableError, match="newer ollm"):
            LogStore(path, readonly=readonly)
