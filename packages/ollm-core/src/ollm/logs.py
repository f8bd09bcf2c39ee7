"""Conversation logs: every conversation saved in a SQLite database, searchable, resumable.

``ollm chat`` logs each conversation here (unless ``--no-log`` or ``OLLM_LOGS=off``), and
``ollm chat -c`` goes on with the last one. In Python it is opt-in::

    from ollm.logs import LogStore

    with LogStore() as logs:                       # the same database as the CLI
        cid = logs.save(client.conversation, provider="ollama", model="llama3.2")
        ...
        conversation = logs.load(cid)              # an ollm.Conversation again
        for info in logs.list(query="paris"):      # full-text search (FTS5)
            print(info.id, info.model, info.preview)

The database is the standard library's ``sqlite3`` in WAL mode, so several ``ollm``
processes may write at once (each write is one short transaction; a busy database is
waited for, five seconds at most). Its location is ``OLLM_LOGS_PATH``, else
``logs.db`` in ollm's data folder (``$XDG_DATA_HOME/ollm``, ``~/.local/share/ollm``;
``~/Library/Application Support/ollm`` on macOS; ``%LOCALAPPDATA%\\ollm`` on Windows).
The schema has a version (``PRAGMA user_version``) and migrations from the first one on;
a database from a newer ollm, a corrupt file or one that cannot be written is a
``LogsUnavailableError`` that says what to do.
"""

from __future__ import annotations

import builtins
import os
import sqlite3
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import msgspec

from ollm.errors import ErrorCode, OllmError
from ollm.runtime.conversation import Conversation
from ollm.types.events import Usage
from ollm.types.messages import Message, TextPart

__all__ = [
    "ENV_LOGS",
    "ENV_LOGS_PATH",
    "ConversationInfo",
    "LogStore",
    "LogsUnavailableError",
    "logging_enabled",
    "logs_path",
]

ENV_LOGS_PATH = "OLLM_LOGS_PATH"
ENV_LOGS = "OLLM_LOGS"
SCHEMA_VERSION = 1
BUSY_MS = 5000
_OFF = frozenset({"off", "0", "false", "no", "none"})
_PREVIEW = 80

_encode = msgspec.json.Encoder().encode
_decode_message = msgspec.json.Decoder(Message).decode

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
)


class LogsUnavailableError(OllmError):
    """The conversation log cannot be read or written; the message says why and what to do."""

    code = ErrorCode.LOGS_UNAVAILABLE


class ConversationInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """One logged conversation, as ``ollm logs`` lists it."""

    id: str
    created_at: datetime
    updated_at: datetime
    provider: str | None = None
    model: str | None = None
    system: str | None = None
    messages: int = 0
    preview: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0


def logs_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the database is: ``OLLM_LOGS_PATH``, else ``logs.db`` in ollm's data folder."""
    env = os.environ if environ is None else environ
    explicit = env.get(ENV_LOGS_PATH)
    if explicit:
        return Path(explicit).expanduser()
    home = Path(env.get("HOME") or Path.home())
    if sys.platform == "win32":
        base = Path(env.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        base = Path(env.get("XDG_DATA_HOME") or home / ".local" / "share")
    return base / "ollm" / "logs.db"


def logging_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """False when ``OLLM_LOGS`` is ``off`` (or ``0``, ``false``, ``no``)."""
    env = os.environ if environ is None else environ
    return env.get(ENV_LOGS, "").strip().lower() not in _OFF


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _new_id() -> str:
    """Sorts by time: microseconds since 1970 in hex, then randomness (20 characters)."""
    # os.urandom, not secrets: secrets imports hashlib and hmac (milliseconds at start-up).
    return f"{time.time_ns() // 1000:014x}{os.urandom(3).hex()}"


def _text(message: Message) -> str:
    text = "".join(part.text for part in message.parts if isinstance(part, TextPart))
    if message.tool_calls:
        calls = " ".join(
            f"{call.name}({_encode(call.args).decode()})" for call in message.tool_calls
        )
        text = f"{text} {calls}".strip()
    return text


class LogStore:
    """The conversation log: a SQLite database (``logs_path()`` unless ``path`` is given).

    Opening creates the file, its folder and its tables (or migrates an older schema).
    Every method runs one short transaction; a failure of the database (corrupt, locked
    longer than five seconds, a full disk, no permission) is ``LogsUnavailableError``.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else logs_path()
        self._db: sqlite3.Connection | None = None
        with self._guard("be opened"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None)
            self._db = db
            db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            self._migrate(db)

    # -- lifetime ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the database (idempotent)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> LogStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def db(self) -> sqlite3.Connection:
        """The open ``sqlite3`` connection (for queries of your own; do not close it)."""
        if self._db is None:
            raise LogsUnavailableError(f"The conversation log {self.path} is closed.")
        return self._db

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        try:
            yield
        except LogsUnavailableError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise LogsUnavailableError(self._explain(doing, exc)) from None

    def _explain(self, doing: str, exc: BaseException) -> str:
        text = str(exc)
        where = f"The conversation log {self.path}"
        off = f"Move it with {ENV_LOGS_PATH}=..., or turn logging off with {ENV_LOGS}=off"
        if isinstance(exc, sqlite3.DatabaseError) and (
            "not a database" in text or "malformed" in text
        ):
            return (
                f"{where} is damaged ({text}). Move it aside (ollm starts a new one), or "
                f"point {ENV_LOGS_PATH} at another file."
            )
        if "locked" in text or "busy" in text:
            return (
                f"{where} stayed locked by another program for {BUSY_MS // 1000} s ({text}). "
                f"Try again; {off.lower()}."
            )
        if "disk" in text or "full" in text or getattr(exc, "errno", None) == 28:
            return f"{where} cannot grow: the disk is full ({text}). Free some space. {off}."
        return f"{where} could not {doing} ({type(exc).__name__}: {text}). {off}."

    @contextmanager
    def _write(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One write transaction (taken at once, so concurrent writers queue)."""
        with self._guard(doing):
            db = self.db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _migrate(self, db: sqlite3.Connection) -> None:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise LogsUnavailableError(
                f"The conversation log {self.path} was written by a newer ollm (schema "
                f"{version}; this one knows {SCHEMA_VERSION}). Upgrade ollm, or point "
                f"{ENV_LOGS_PATH} at another file."
            )
        if version == SCHEMA_VERSION:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated it while this one waited.
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for steps in _MIGRATIONS[version:]:
                for statement in steps:
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    # -- writing -----------------------------------------------------------------------

    def new_conversation(
        self, *, provider: str | None = None, model: str | None = None, system: str | None = None
    ) -> str:
        """Start a conversation in the log; its id."""
        with self._write("start a conversation") as db:
            return _insert_conversation(db, provider, model, system)

    def append(
        self,
        cid: str,
        messages: Sequence[Message],
        *,
        provider: str | None = None,
        model: str | None = None,
    ) -> None:
        """Add ``messages`` at the end of the conversation ``cid``."""
        with self._write("save the messages") as db:
            _insert_messages(db, cid, messages, provider, model)

    def record_response(
        self,
        cid: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        finish_reason: str | None = None,
        usage: Usage | None = None,
        duration_ms: float | None = None,
        error_code: str | None = None,
        error_message: str | None = None,
    ) -> None:
        """Note how one chat of the conversation went: usage, timing, finish, error."""
        self.log_exchange(
            cid,
            (),
            provider=provider,
            model=model,
            finish_reason=finish_reason,
            usage=usage,
            duration_ms=duration_ms,
            error_code=error_code,
            error_message=error_message,
        )

    def log_exchange(
        self,
        cid: str | None,
        messages: Sequence[Message],
        *,
        provider: str | None = None,
        model: str | None = None,
        system: str | None = None,
        finish_reason: str | None = None,
        usage: Usage | None = None,
        duration_ms: float | None = None,
        error_code: str | None = None,
        error_message: str | None = None,
    ) -> str:
        """One chat's messages and how it went, in one transaction (a new conversation
        when ``cid`` is ``None``); the conversation's id."""
        with self._write("save the conversation") as db:
            if cid is None:
                cid = _insert_conversation(db, provider, model, system)
            if messages:
                _insert_messages(db, cid, messages, provider, model)
            _insert_response(
                db,
                cid,
                provider,
                model,
                finish_reason,
                usage,
                duration_ms,
                error_code,
                error_message,
            )
        return cid

    def save(
        self,
        conversation: Conversation,
        cid: str | None = None,
        *,
        provider: str | None = None,
        model: str | None = None,
        system: str | None = None,
    ) -> str:
        """Save ``conversation`` (as a new one, or the messages ``cid`` does not have yet)."""
        if cid is None:
            cid = self.new_conversation(provider=provider, model=model, system=system)
        stored = self.info(cid).messages
        messages = conversation.messages
        if len(messages) > stored:
            self.append(cid, messages[stored:], provider=provider, model=model)
        return cid

    def remove(self, cid: str) -> str:
        """Delete a conversation (``cid`` or a unique prefix of it); its full id."""
        full = self.resolve(cid)
        with self._write("delete the conversation") as db:
            db.execute("DELETE FROM conversations WHERE id = ?", (full,))
        return full

    # -- reading -----------------------------------------------------------------------

    def resolve(self, cid: str) -> str:
        """The full id of the conversation ``cid`` (or a unique prefix of it)."""
        prefix = cid.strip()
        with self._guard("be read"):
            rows = self.db.execute(
                "SELECT id FROM conversations WHERE id >= ? AND id < ? ORDER BY id LIMIT 2",
                (prefix, prefix + "\uffff"),
            ).fetchall()
        if not prefix or not rows:
            raise LogsUnavailableError(
                f"There is no logged conversation {cid!r}. See them with: ollm logs"
            )
        if len(rows) > 1 and rows[0][0] != prefix:
            raise LogsUnavailableError(
                f"{cid!r} is the start of several conversations' ids; give more of it."
            )
        return str(rows[0][0])

    def load(self, cid: str) -> Conversation:
        """The conversation ``cid`` (or a unique prefix of it), as an ``ollm.Conversation``."""
        full = self.resolve(cid)
        with self._guard("be read"):
            rows = self.db.execute(
                "SELECT message FROM messages WHERE conversation_id = ? ORDER BY seq", (full,)
            ).fetchall()
        try:
            return Conversation(_decode_message(row[0]) for row in rows)
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
            raise LogsUnavailableError(
                f"The conversation {full} in {self.path} cannot be read back ({exc})."
            ) from None

    def info(self, cid: str) -> ConversationInfo:
        """What the log knows of one conversation."""
        found = self._infos("WHERE c.id = ?", (self.resolve(cid),), 1)
        return found[0]

    def latest(self) -> ConversationInfo | None:
        """The conversation written to last, if any."""
        found = self._infos("", (), 1)
        return found[0] if found else None

    def list(
        self, *, limit: int = 10, model: str | None = None, query: str | None = None
    ) -> builtins.list[ConversationInfo]:
        """The latest conversations first; ``model`` narrows, ``query`` searches the text."""
        clauses: list[str] = []
        values: list[object] = []
        if model:
            clauses.append("c.model = ?")
            values.append(model)
        if query:
            clauses.append(
                "c.id IN (SELECT m.conversation_id FROM messages_fts f "
                "JOIN messages m ON m.id = f.rowid WHERE messages_fts MATCH ?)"
            )
            values.append(_fts_query(query))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        return self._infos(where, tuple(values), max(1, limit))

    def _infos(
        self, where: str, values: tuple[object, ...], limit: int
    ) -> builtins.list[ConversationInfo]:
        sql = (
            "SELECT c.id, c.created_at, c.updated_at, c.provider, c.model, c.system, "
            "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id), "
            "(SELECT m.content FROM messages m WHERE m.conversation_id = c.id "
            " AND m.role = 'user' ORDER BY m.seq LIMIT 1), "
            "(SELECT COALESCE(SUM(prompt_tokens), 0) FROM responses r "
            " WHERE r.conversation_id = c.id), "
            "(SELECT COALESCE(SUM(completion_tokens), 0) FROM responses r "
            " WHERE r.conversation_id = c.id) "
            f"FROM conversations c {where} ORDER BY c.updated_at DESC, c.rowid DESC LIMIT ?"
        )
        with self._guard("be read"):
            rows = self.db.execute(sql, (*values, limit)).fetchall()
        infos = []
        for row in rows:
            preview = " ".join(str(row[7] or "").split())
            if len(preview) > _PREVIEW:
                preview = preview[: _PREVIEW - 3] + "..."
            infos.append(
                ConversationInfo(
                    id=row[0],
                    created_at=datetime.fromisoformat(row[1]),
                    updated_at=datetime.fromisoformat(row[2]),
                    provider=row[3],
                    model=row[4],
                    system=row[5],
                    messages=int(row[6]),
                    preview=preview,
                    prompt_tokens=int(row[8]),
                    completion_tokens=int(row[9]),
                )
            )
        return infos


def _insert_conversation(
    db: sqlite3.Connection, provider: str | None, model: str | None, system: str | None
) -> str:
    cid = _new_id()
    now = _now()
    db.execute(
        "INSERT INTO conversations (id, created_at, updated_at, provider, model, system) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (cid, now, now, provider, model, system),
    )
    return cid


def _insert_messages(
    db: sqlite3.Connection,
    cid: str,
    messages: Sequence[Message],
    provider: str | None,
    model: str | None,
) -> None:
    now = _now()
    row = db.execute(
        "SELECT COALESCE(MAX(seq), -1) FROM messages WHERE conversation_id = ?", (cid,)
    ).fetchone()
    seq = int(row[0]) + 1
    db.executemany(
        "INSERT INTO messages (conversation_id, seq, role, content, message, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [(cid, seq + n, m.role, _text(m), _encode(m), now) for n, m in enumerate(messages)],
    )
    db.execute(
        "UPDATE conversations SET updated_at = ?, provider = COALESCE(?, provider), "
        "model = COALESCE(?, model) WHERE id = ?",
        (now, provider, model, cid),
    )


def _insert_response(
    db: sqlite3.Connection,
    cid: str,
    provider: str | None,
    model: str | None,
    finish_reason: str | None,
    usage: Usage | None,
    duration_ms: float | None,
    error_code: str | None,
    error_message: str | None,
) -> None:
    db.execute(
        "INSERT INTO responses (conversation_id, created_at, provider, model, finish_reason, "
        "prompt_tokens, completion_tokens, total_tokens, duration_ms, error_code, "
        "error_message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            cid,
            _now(),
            provider,
            model,
            finish_reason,
            usage.prompt_tokens if usage else None,
            usage.completion_tokens if usage else None,
            usage.total_tokens if usage else None,
            duration_ms,
            error_code,
            error_message,
        ),
    )


def _fts_query(text: str) -> str:
    """A user's words as an FTS5 query: each word quoted (no operator syntax to get wrong)."""
    words = [w.replace('"', '""') for w in text.split()]
    return " ".join(f'"{w}"' for w in words) or '""'
