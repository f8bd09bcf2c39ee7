"""The conversation log's tables, and the migrations from each schema version to the next.

Private to ``ollm.logs``. The version is SQLite's ``PRAGMA user_version``; migration
``n`` takes a database from version ``n`` to ``n + 1``, in one transaction.
"""

from __future__ import annotations

import sqlite3

__all__ = ["SCHEMA_VERSION", "UNANSWERED_PREVIEW", "in_memory", "migrate", "schema_version"]

UNANSWERED_PREVIEW = 500
"""How many characters of a prompt no model answered the log keeps (with its error)."""

# A user message after the last message any model wrote in its conversation.
_UNANSWERED = (
    "m.role = 'user' AND m.seq > COALESCE((SELECT MAX(o.seq) FROM messages o "
    "WHERE o.conversation_id = m.conversation_id AND o.role != 'user'), -1)"
)

# Each migration takes the schema from its index to the next version.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            provider TEXT,
            model TEXT,
            system TEXT
        )""",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            message BLOB NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (conversation_id, seq)
        )""",
        """CREATE TABLE responses (
            id INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            created_at TEXT NOT NULL,
            provider TEXT,
            model TEXT,
            finish_reason TEXT,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            total_tokens INTEGER,
            duration_ms REAL,
            error_code TEXT,
            error_message TEXT
        )""",
        "CREATE INDEX conversations_by_update ON conversations(updated_at)",
        "CREATE INDEX responses_by_conversation ON responses(conversation_id)",
        # Full-text search over the messages' text, kept in step by triggers.
        "CREATE VIRTUAL TABLE messages_fts USING fts5("
        "content, content='messages', content_rowid='id')",
        """CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
        END""",
        """CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
            VALUES ('delete', old.id, old.content);
        END""",
    ),
    (
        # A conversation that two `ollm chat -c` went on with at once: the second one's
        # exchange became a new conversation, branching from this one after N messages.
        "ALTER TABLE conversations ADD COLUMN forked_from TEXT",
        "ALTER TABLE conversations ADD COLUMN forked_at INTEGER",
        # Where in the conversation each response came (its message count then), and
        # for a request no model answered, a bounded preview of the unanswered prompt.
        "ALTER TABLE responses ADD COLUMN messages_after INTEGER",
        "ALTER TABLE responses ADD COLUMN unanswered TEXT",
        # Version 1 logged prompts no model answered (refused as too long, or the server
        # was down) as messages, and `ollm chat -c` sent them again, and failed again. Those
        # at a conversation's end move to a response of their own, as version 2 writes
        # them, but whole: version 1 kept the user's words, and a migration never loses
        # what a user wrote (version 2 bounds only the prompts it logs itself).
        f"""INSERT INTO responses (conversation_id, created_at, messages_after, unanswered)
            SELECT m.conversation_id, m.created_at, m.seq, m.content
            FROM messages m WHERE {_UNANSWERED} ORDER BY m.conversation_id, m.seq""",
        f"DELETE FROM messages WHERE id IN (SELECT m.id FROM messages m WHERE {_UNANSWERED})",
        """UPDATE responses SET messages_after = (
            SELECT COUNT(*) FROM messages m
            WHERE m.conversation_id = responses.conversation_id
            AND m.created_at <= responses.created_at
        ) WHERE messages_after IS NULL""",
    ),
    (
        # Whether each tool call could run, who decided (a rule, a person, a middleware)
        # and why, with the arguments it was decided on.
        """CREATE TABLE decisions (
            id INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            created_at TEXT NOT NULL,
            messages_after INTEGER,
            call_id TEXT,
            tool TEXT NOT NULL,
            args TEXT,
            decision TEXT NOT NULL,
            decided_by TEXT,
            reason TEXT,
            scope TEXT
        )""",
        "CREATE INDEX decisions_by_conversation ON decisions(conversation_id)",
    ),
    (
        # Typed output (chat --schema): the JSON Schema a chat asked for, and the value it
        # got, as JSON text.
        "ALTER TABLE responses ADD COLUMN output_schema TEXT",
        "ALTER TABLE responses ADD COLUMN output TEXT",
    ),
    (
        # Each compaction of a request (a CompactionEvent): where in the conversation it
        # happened (its message count then), by which strategy, and how far.
        """CREATE TABLE compactions (
            id INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            created_at TEXT NOT NULL,
            messages_after INTEGER NOT NULL,
            strategy TEXT NOT NULL,
            removed INTEGER NOT NULL,
            tokens_before INTEGER NOT NULL,
            tokens_after INTEGER NOT NULL
        )""",
        "CREATE INDEX compactions_by_conversation ON compactions(conversation_id)",
    ),
)

SCHEMA_VERSION = len(_MIGRATIONS)


def schema_version(db: sqlite3.Connection) -> int:
    """The database's schema version (0 for a new, empty one)."""
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def migrate(db: sqlite3.Connection) -> None:
    """Bring an older schema up to ``SCHEMA_VERSION``, in one write transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated it while this one waited.
        version = schema_version(db)
        for steps in _MIGRATIONS[version:]:
            for statement in steps:
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def in_memory(source: sqlite3.Connection | None) -> sqlite3.Connection:
    """A database in memory with the current schema: empty, or a copy of ``source``
    (which is closed) upgraded, so that an older file can be read without a write."""
    copy = sqlite3.connect(":memory:", isolation_level=None)
    if source is not None:
        source.backup(copy)
        source.close()
    migrate(copy)
    return copy
