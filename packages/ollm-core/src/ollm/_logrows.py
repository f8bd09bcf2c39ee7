"""The conversation log's rows: how conversations, messages and responses are written
and found. Private to ``ollm.logs``; every function runs inside the caller's transaction.
"""

from __future__ import annotations

import base64
import os
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec

from ollm._logschema import UNANSWERED_PREVIEW
from ollm.types.messages import Message, TextPart
from ollm.types.text import encode_json, valid_unicode

__all__ = [
    "CONVERSATION_COLUMNS",
    "DECISION_COLUMNS",
    "RESPONSE_COLUMNS",
    "SHORT_ID",
    "count",
    "execute",
    "fork",
    "fts_query",
    "insert_conversation",
    "insert_decisions",
    "insert_messages",
    "insert_response",
    "new_id",
    "now",
    "replace_messages",
    "searchable_text",
    "short_id",
    "touch",
    "unanswered_preview",
]

SHORT_ID = 6

_encode = msgspec.json.Encoder().encode


def now() -> str:
    """The time, as the log stores it (UTC, ISO 8601, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def new_id() -> str:
    """Random from its first character, so that a few of them name it: 16 of base 32.

    (Ids of older versions start with their time; they keep working. Conversations are
    ordered by their ``created_at`` and ``updated_at`` columns, never by id.)
    """
    # os.urandom, not secrets: secrets imports hashlib and hmac (milliseconds at start-up).
    return base64.b32encode(os.urandom(10)).decode("ascii").lower()


def searchable_text(message: Message) -> str:
    """What full-text search sees of a message: its text, then its tool calls."""
    text = "".join(part.text for part in message.parts if isinstance(part, TextPart))
    if message.tool_calls:
        calls = " ".join(
            f"{call.name}({encode_json(call.args, _encode).decode()})"
            for call in message.tool_calls
        )
        text = f"{text} {calls}".strip()
    return text


def unanswered_preview(messages: Sequence[Message]) -> str | None:
    """The start of the messages no model answered (``UNANSWERED_PREVIEW`` characters)."""
    if not messages:
        return None
    text = "\n".join(searchable_text(m) for m in messages)
    if len(text) <= UNANSWERED_PREVIEW:
        return text
    return f"{text[:UNANSWERED_PREVIEW]}... ({len(text):,} characters in all)"


def execute(db: sqlite3.Connection, sql: str, values: Sequence[Any]) -> sqlite3.Cursor:
    """``db.execute``, with strings that are not valid Unicode stored with U+FFFD."""
    try:
        return db.execute(sql, values)
    except UnicodeEncodeError:
        return db.execute(sql, valid_unicode(tuple(values)))


def insert_conversation(
    db: sqlite3.Connection,
    provider: str | None,
    model: str | None,
    system: str | None,
    *,
    forked_from: str | None = None,
    forked_at: int | None = None,
) -> str:
    """A new conversation; its id."""
    cid = new_id()
    stamp = now()
    execute(
        db,
        "INSERT INTO conversations (id, created_at, updated_at, provider, model, system, "
        "forked_from, forked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (cid, stamp, stamp, provider, model, system, forked_from, forked_at),
    )
    return cid


def count(db: sqlite3.Connection, cid: str) -> int | None:
    """How many messages the conversation holds (``None`` when it is gone)."""
    row = db.execute(
        "SELECT (SELECT COUNT(*) FROM messages WHERE conversation_id = c.id) "
        "FROM conversations c WHERE c.id = ?",
        (cid,),
    ).fetchone()
    return None if row is None else int(row[0])


def fork(
    db: sqlite3.Connection,
    parent: str,
    base: int,
    provider: str | None,
    model: str | None,
    system: str | None,
) -> str:
    """A new conversation holding ``parent``'s first ``base`` messages; its id."""
    row = db.execute(
        "SELECT provider, model, system FROM conversations WHERE id = ?", (parent,)
    ).fetchone()
    if row is not None:
        provider, model, system = provider or row[0], model or row[1], system or row[2]
    cid = insert_conversation(db, provider, model, system, forked_from=parent, forked_at=base)
    db.execute(
        "INSERT INTO messages (conversation_id, seq, role, content, message, created_at) "
        "SELECT ?, seq, role, content, message, created_at FROM messages "
        "WHERE conversation_id = ? AND seq < ? ORDER BY seq",
        (cid, parent, base),
    )
    return cid


def insert_messages(db: sqlite3.Connection, cid: str, messages: Sequence[Message]) -> int:
    """Add ``messages`` at the end; how many the conversation holds then."""
    row = db.execute(
        "SELECT COALESCE(MAX(seq), -1) FROM messages WHERE conversation_id = ?", (cid,)
    ).fetchone()
    seq = int(row[0]) + 1
    stamp = now()
    for n, m in enumerate(messages):
        execute(
            db,
            "INSERT INTO messages (conversation_id, seq, role, content, message, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (cid, seq + n, m.role, searchable_text(m), encode_json(m, _encode), stamp),
        )
    return seq + len(messages)


def replace_messages(db: sqlite3.Connection, cid: str, messages: Mapping[int, Message]) -> None:
    """Put each of ``messages`` in place of the one logged at its position (``seq``)."""
    for seq, m in messages.items():
        row = db.execute(
            "SELECT created_at FROM messages WHERE conversation_id = ? AND seq = ?", (cid, seq)
        ).fetchone()
        if row is None:
            continue
        # Deleted and inserted again, so that the full-text index follows.
        db.execute("DELETE FROM messages WHERE conversation_id = ? AND seq = ?", (cid, seq))
        execute(
            db,
            "INSERT INTO messages (conversation_id, seq, role, content, message, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (cid, seq, m.role, searchable_text(m), encode_json(m, _encode), row[0]),
        )


def touch(db: sqlite3.Connection, cid: str, provider: str | None, model: str | None) -> None:
    """The conversation was written to now (and goes on with ``provider`` and ``model``)."""
    execute(
        db,
        "UPDATE conversations SET updated_at = ?, provider = COALESCE(?, provider), "
        "model = COALESCE(?, model) WHERE id = ?",
        (now(), provider, model, cid),
    )


def short_id(db: sqlite3.Connection, cid: str) -> str:
    """The shortest start of ``cid`` (``SHORT_ID`` characters at least) no other id shares."""
    length = SHORT_ID
    for sql in (
        "SELECT id FROM conversations WHERE id < ? ORDER BY id DESC LIMIT 1",
        "SELECT id FROM conversations WHERE id > ? ORDER BY id LIMIT 1",
    ):
        row = db.execute(sql, (cid,)).fetchone()
        if row is not None:
            other = str(row[0])
            shared = next(
                (n for n, (a, b) in enumerate(zip(cid, other, strict=False)) if a != b),
                min(len(cid), len(other)),
            )
            length = max(length, shared + 1)
    return cid[:length]


def fts_query(text: str) -> str:
    """A user's words as an FTS5 query: each word quoted (no operator syntax to get wrong)."""
    words = [w.replace('"', '""') for w in text.split()]
    return " ".join(f'"{w}"' for w in words) or '""'


def insert_response(db: sqlite3.Connection, cid: str, values: Sequence[Any]) -> None:
    """A row of ``responses``: ``values`` in the order of ``RESPONSE_COLUMNS``."""
    columns = ", ".join(RESPONSE_COLUMNS)
    marks = ", ".join("?" * (len(RESPONSE_COLUMNS) + 1))
    execute(
        db, f"INSERT INTO responses (conversation_id, {columns}) VALUES ({marks})", (cid, *values)
    )


def insert_decisions(
    db: sqlite3.Connection, cid: str, messages_after: int, decisions: Sequence[Any]
) -> None:
    """A row of ``decisions`` for each ``ToolDecisionEvent``."""
    stamp = now()
    for d in decisions:
        execute(
            db,
            f"INSERT INTO decisions (conversation_id, {', '.join(DECISION_COLUMNS)}) "
            f"VALUES ({', '.join('?' * (len(DECISION_COLUMNS) + 1))})",
            (
                cid,
                stamp,
                messages_after,
                d.call.id,
                d.call.name,
                encode_json(d.call.args, _encode).decode(),
                d.decision,
                d.by,
                d.reason,
                d.scope,
            ),
        )


def insert_compactions(
    db: sqlite3.Connection, cid: str, count: int, compactions: Sequence[tuple[int, Any]]
) -> None:
    """A row of ``compactions`` for each ``(position, CompactionEvent)``: ``position``
    is how many of the ``count`` messages the conversation holds now came before it."""
    stamp = now()
    for position, c in compactions:
        execute(
            db,
            f"INSERT INTO compactions (conversation_id, {', '.join(COMPACTION_COLUMNS)}) "
            f"VALUES ({', '.join('?' * (len(COMPACTION_COLUMNS) + 1))})",
            (
                cid,
                stamp,
                min(max(position, 0), count),
                c.strategy,
                c.removed,
                c.tokens_before,
                c.tokens_after,
            ),
        )


COMPACTION_COLUMNS = (
    "created_at",
    "messages_after",
    "strategy",
    "removed",
    "tokens_before",
    "tokens_after",
)

DECISION_COLUMNS = (
    "created_at",
    "messages_after",
    "call_id",
    "tool",
    "args",
    "decision",
    "decided_by",
    "reason",
    "scope",
)

RESPONSE_COLUMNS = (
    "created_at",
    "messages_after",
    "provider",
    "model",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "duration_ms",
    "error_code",
    "error_message",
    "unanswered",
    "output_schema",
    "output",
)

# One row per conversation, as ConversationInfo takes it (preview: the first question,
# else the first prompt no model answered).
CONVERSATION_COLUMNS = (
    "SELECT c.id, c.created_at, c.updated_at, c.provider, c.model, c.system, "
    "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id), "
    "COALESCE((SELECT m.content FROM messages m WHERE m.conversation_id = c.id "
    " AND m.role = 'user' ORDER BY m.seq LIMIT 1), "
    " (SELECT r.unanswered FROM responses r WHERE r.conversation_id = c.id "
    " AND r.unanswered IS NOT NULL ORDER BY r.id LIMIT 1)), "
    "(SELECT COALESCE(SUM(prompt_tokens), 0) FROM responses r "
    " WHERE r.conversation_id = c.id), "
    "(SELECT COALESCE(SUM(completion_tokens), 0) FROM responses r "
    " WHERE r.conversation_id = c.id), "
    "c.forked_from, c.forked_at FROM conversations c"
)
