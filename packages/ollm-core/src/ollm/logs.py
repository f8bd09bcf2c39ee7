"""Conversation logs: every conversation saved in a SQLite database, searchable, resumable.

``ollm chat`` logs each conversation here (unless ``--no-log`` or ``OLLM_LOGS=off``), and
``ollm chat -c`` goes on with the last one. In Python it is opt-in::

    from ollm.logs import LogStore

    with LogStore() as logs:                       # the same database as the CLI
        cid = logs.save(client.conversation, provider="ollama", model="llama3.2")
        ...
        conversation = logs.load(cid)              # an ollm.Conversation again
        for info in logs.list(query="paris"):      # full-text search (FTS5)
            print(info.short_id, info.model, info.preview)

The database is the standard library's ``sqlite3`` in WAL mode, so several ``ollm``
processes may write at once (each write is one short transaction; a busy database is
waited for, five seconds at most, or ``OLLM_LOGS_BUSY_TIMEOUT`` seconds). Its location
is ``OLLM_LOGS_PATH``, else ``logs.db`` in ollm's data folder (``$XDG_DATA_HOME/ollm``,
``~/.local/share/ollm``; ``~/Library/Application Support/ollm`` on macOS;
``%LOCALAPPDATA%\\ollm`` on Windows).

It holds every prompt and answer, so it is private: ollm creates its folder ``0700`` and
the database (and its ``-wal`` and ``-shm`` files) ``0600``, whatever the umask. A
database that other users may read, or ollm's own folder when they may list it, is
logged as a warning once per process (``LogStore.exposure`` has the text); ollm does
not change the modes of files it did not create.

The schema has a version (``PRAGMA user_version``) and migrations from the first one on;
a database from a newer ollm, a corrupt file or one that cannot be written is a
``LogsUnavailableError`` that says what to do. ``LogStore(readonly=True)`` only reads:
from a folder that cannot be written, or an older schema (read through a migrated copy
in memory), and a missing database reads as an empty one. Strings that are not valid
Unicode (a lone surrogate in a model's tool arguments) are stored with U+FFFD in their
place (see ``ollm.valid_unicode``).
"""

from __future__ import annotations

import builtins
import logging
import math
import os
import sqlite3
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from ollm import _logrows as rows
from ollm._logfiles import connect, create_private, exposure, open_read_only
from ollm._logschema import (
    SCHEMA_VERSION,
    UNANSWERED_PREVIEW,
    in_memory,
    migrate,
    schema_version,
)
from ollm.errors import LogsUnavailableError
from ollm.runtime.conversation import Conversation
from ollm.types.events import CompactionEvent, ToolDecisionEvent, Usage
from ollm.types.messages import Message
from ollm.types.text import encode_json

__all__ = [
    "DEFAULT_BUSY_TIMEOUT",
    "ENV_LOGS",
    "ENV_LOGS_BUSY_TIMEOUT",
    "ENV_LOGS_PATH",
    "UNANSWERED_PREVIEW",
    "CompactionInfo",
    "ConversationInfo",
    "DecisionInfo",
    "LogStore",
    "LogsUnavailableError",
    "ResponseInfo",
    "data_dir",
    "logging_enabled",
    "logs_busy_timeout",
    "logs_path",
]

ENV_LOGS_PATH = "OLLM_LOGS_PATH"
ENV_LOGS = "OLLM_LOGS"
ENV_LOGS_BUSY_TIMEOUT = "OLLM_LOGS_BUSY_TIMEOUT"
DEFAULT_BUSY_TIMEOUT = 5.0
"""How long a write waits for a database another process is writing (seconds)."""

_OFF = frozenset({"off", "0", "false", "no", "none"})
_PREVIEW = 80

log = logging.getLogger(__name__)
_decode_message = msgspec.json.Decoder(Message).decode
_warned: set[str] = set()  # the exposed databases already warned about in this process


class ConversationInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """One logged conversation, as ``ollm logs`` lists it.

    ``short_id`` is the shortest start of ``id`` (six characters at least) that no other
    conversation's id shares: it names this one wherever an id is asked for.
    ``forked_from`` and ``forked_at`` say which conversation this one branched from, and
    after how many of its messages (when two chats went on with that one at once).
    """

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
    short_id: str = ""
    forked_from: str | None = None
    forked_at: int | None = None


class ResponseInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """How one chat of a conversation went: its finish, usage, timing and error.

    ``messages_after`` is how many messages the conversation held once it was logged
    (where it belongs among them); ``unanswered`` is the start of a prompt no model
    answered (refused before anything was sent, or the request failed), which is not
    one of the conversation's messages. ``output_schema`` is the JSON Schema a chat with
    typed output asked for and ``output`` the value it got, both as JSON text.
    """

    created_at: datetime
    messages_after: int = 0
    provider: str | None = None
    model: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    duration_ms: float | None = None
    error_code: str | None = None
    error_message: str | None = None
    unanswered: str | None = None
    output_schema: str | None = None
    output: str | None = None


class CompactionInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """One compaction of a request of the conversation (a ``CompactionEvent``):
    ``strategy`` left ``removed`` messages out of what was sent (or shortened them), from
    about ``tokens_before`` tokens to ``tokens_after``. The log keeps every message.

    ``messages_after`` is how many messages the conversation held when it happened.
    """

    created_at: datetime
    strategy: str
    removed: int
    tokens_before: int
    tokens_after: int
    messages_after: int = 0


class DecisionInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """Whether one tool call could run: ``decision`` (``allow`` or ``deny``), who
    decided (``by``: a rule, a person, a middleware... as ``ToolDecisionEvent`` says)
    and why, with the arguments it was decided on (a JSON object as text).

    ``messages_after`` is how many messages the conversation held once it was logged.
    """

    created_at: datetime
    tool: str
    decision: str
    messages_after: int = 0
    call_id: str | None = None
    args: str | None = None
    by: str | None = None
    reason: str | None = None
    scope: str | None = None


def logs_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the database is: ``OLLM_LOGS_PATH``, else ``logs.db`` in ollm's data folder."""
    env = os.environ if environ is None else environ
    explicit = env.get(ENV_LOGS_PATH)
    if explicit:
        return Path(explicit).expanduser()
    return data_dir(env) / "logs.db"


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """ollm's data folder, where plugins keep their files too (nothing is created).

    ``$XDG_DATA_HOME/ollm``, else ``~/.local/share/ollm``; ``~/Library/Application
    Support/ollm`` on macOS; ``%LOCALAPPDATA%\\ollm`` on Windows.
    """
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or Path.home())
    if sys.platform == "win32":
        base = Path(env.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        base = Path(env.get("XDG_DATA_HOME") or home / ".local" / "share")
    return base / "ollm"


def logging_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """False when ``OLLM_LOGS`` is ``off`` (or ``0``, ``false``, ``no``)."""
    env = os.environ if environ is None else environ
    return env.get(ENV_LOGS, "").strip().lower() not in _OFF


def logs_busy_timeout(environ: Mapping[str, str] | None = None) -> float:
    """How long a write waits for a busy database: ``OLLM_LOGS_BUSY_TIMEOUT`` (seconds),
    else ``DEFAULT_BUSY_TIMEOUT``; ``LogsUnavailableError`` when it is not a number."""
    env = os.environ if environ is None else environ
    text = env.get(ENV_LOGS_BUSY_TIMEOUT, "").strip()
    if not text:
        return DEFAULT_BUSY_TIMEOUT
    try:
        return _check_timeout(float(text))
    except ValueError:
        raise LogsUnavailableError(
            f"{ENV_LOGS_BUSY_TIMEOUT}={text!r} is not a number of seconds: set it to "
            f"0 or more (for example {ENV_LOGS_BUSY_TIMEOUT}=5), or unset it."
        ) from None


def _check_timeout(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError("busy_timeout must be a number of seconds")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"busy_timeout must be 0 or more seconds, not {seconds!r}")
    return float(seconds)


class LogStore:
    """The conversation log: a SQLite database (``logs_path()`` unless ``path`` is given).

    Opening creates the file, its folder and its tables (or migrates an older schema);
    ``readonly=True`` creates and changes nothing. Every method runs one short
    transaction; a failure of the database (corrupt, locked longer than
    ``busy_timeout`` seconds, a full disk, no permission) is ``LogsUnavailableError``.
    ``busy_timeout`` defaults to ``OLLM_LOGS_BUSY_TIMEOUT``, else five seconds.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        readonly: bool = False,
        busy_timeout: float | None = None,
    ) -> None:
        own_folder = path is None and not os.environ.get(ENV_LOGS_PATH)
        self.path = Path(path) if path is not None else logs_path()
        self.readonly = readonly
        self.busy_timeout = (
            logs_busy_timeout() if busy_timeout is None else _check_timeout(busy_timeout)
        )
        self.exposure: str | None = None  # who else may read it: the warning, if any
        self._db: sqlite3.Connection | None = None
        with self._guard("be opened"):
            if not readonly:
                create_private(self.path)
            self.exposure = exposure(self.path, folder=own_folder)
            if self.exposure and str(self.path) not in _warned:
                _warned.add(str(self.path))
                log.warning("%s", self.exposure)
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        if self.readonly and not self.path.exists():
            return in_memory(None)  # nothing logged yet: an empty log, and no file made
        if self.readonly:
            db = open_read_only(self.path, self.busy_timeout)
        else:
            db = connect(self.path, self.busy_timeout)
        try:
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            if not self.readonly:
                db.execute("PRAGMA foreign_keys = ON")
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")
            version = schema_version(db)
            if version > SCHEMA_VERSION:
                raise LogsUnavailableError(
                    f"The conversation log {self.path} was written by a newer ollm (schema "
                    f"{version}; this one knows {SCHEMA_VERSION}). Upgrade ollm, or point "
                    f"{ENV_LOGS_PATH} at another file."
                )
            if version < SCHEMA_VERSION:
                if self.readonly:  # read an upgraded copy; the file is left as it is
                    return in_memory(db)
                migrate(db)
        except BaseException:
            db.close()
            raise
        return db

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
        off = f"move it with {ENV_LOGS_PATH}=..., or turn logging off with {ENV_LOGS}=off"
        if isinstance(exc, sqlite3.DatabaseError) and (
            "not a database" in text or "malformed" in text
        ):
            return (
                f"{where} is damaged ({text}). Move it aside (ollm starts a new one), or "
                f"point {ENV_LOGS_PATH} at another file."
            )
        if "locked" in text or "busy" in text:
            return (
                f"{where} stayed locked by another program for {self.busy_timeout:g} s "
                f"({text}). Try again ({ENV_LOGS_BUSY_TIMEOUT} waits longer), or {off}."
            )
        if "disk" in text or "full" in text or getattr(exc, "errno", None) == 28:
            return f"{where} cannot grow: the disk is full ({text}). Free some space, or {off}."
        return f"{where} could not {doing} ({type(exc).__name__}: {text}). You may {off}."

    @contextmanager
    def _write(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One write transaction (taken at once, so concurrent writers queue)."""
        if self.readonly:
            raise LogsUnavailableError(
                f"The conversation log {self.path} was opened to be read only; it cannot "
                f"{doing} (open it with LogStore() to write)."
            )
        with self._guard(doing):
            db = self.db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
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
            return rows.insert_conversation(db, provider, model, system)

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
            rows.insert_messages(db, cid, messages)
            rows.touch(db, cid, provider, model)

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
        base: int | None = None,
        unanswered: Sequence[Message] = (),
        decisions: Sequence[ToolDecisionEvent] = (),
        compactions: Sequence[tuple[int, CompactionEvent]] = (),
        response: bool = True,
        replaced: Mapping[int, Message] | None = None,
        output_schema: dict[str, Any] | None = None,
        output: str | None = None,
    ) -> str:
        """One chat's messages and how it went, in one transaction; the id of the
        conversation they went to (a new one when ``cid`` is ``None``).

        ``decisions`` are the chat's ``ToolDecisionEvent``s: whether each tool call
        could run, who decided and why (``decisions()`` reads them back).
        ``compactions`` are its ``CompactionEvent``s, each with how many of ``messages``
        came before it (``compactions()`` reads them back).
        ``response=False`` logs the messages alone (a chat still under way, waiting for
        a person's answer: the response follows when it ends); ``replaced`` then puts
        messages logged so in their final form (a reply's calls as they ran), by
        position in the conversation. ``output_schema`` and ``output`` (the value as JSON
        text) are a chat's typed output, when it asked for one.

        ``base`` is how many messages of ``cid`` this chat followed (what was loaded,
        and logged since). If ``cid`` holds another number now, another writer went on
        with it meanwhile: rather than interleave the two, the chat goes to a new
        conversation that branches from ``cid`` after ``base`` messages (copied into
        it; its ``ConversationInfo.forked_from`` names ``cid``), and that id is returned.

        ``unanswered`` are messages of a request no model answered (refused before
        anything was sent, or failed before any reply): they do not join the
        conversation (so a continuation never sends them), and the first
        ``UNANSWERED_PREVIEW`` characters of their text are kept with the response.
        """
        with self._write("save the conversation") as db:
            if cid is None:
                cid = rows.insert_conversation(db, provider, model, system)
            elif base is not None and rows.count(db, cid) != base:
                cid = rows.fork(db, cid, base, provider, model, system)
            if replaced:
                rows.replace_messages(db, cid, replaced)
            count = rows.insert_messages(db, cid, messages)
            rows.touch(db, cid, provider if messages else None, model if messages else None)
            rows.insert_decisions(db, cid, count, decisions)
            before = count - len(messages)
            rows.insert_compactions(
                db, cid, count, [(before + at, event) for at, event in compactions]
            )
            if not response:
                return cid
            rows.insert_response(
                db,
                cid,
                (
                    rows.now(),
                    count,
                    provider,
                    model,
                    finish_reason,
                    usage.prompt_tokens if usage else None,
                    usage.completion_tokens if usage else None,
                    usage.total_tokens if usage else None,
                    duration_ms,
                    error_code,
                    error_message,
                    rows.unanswered_preview(unanswered),
                    None if output_schema is None else encode_json(output_schema).decode(),
                    output,
                ),
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
            found = rows.execute(
                self.db,
                "SELECT id FROM conversations WHERE id >= ? AND id < ? ORDER BY id LIMIT 2",
                (prefix, prefix + "\uffff"),
            ).fetchall()
        if not prefix or not found:
            raise LogsUnavailableError(
                f"There is no logged conversation {cid!r}. See them with: ollm logs"
            )
        if len(found) > 1 and found[0][0] != prefix:
            raise LogsUnavailableError(
                f"{cid!r} is the start of several conversations' ids; give more of it."
            )
        return str(found[0][0])

    def load(self, cid: str) -> Conversation:
        """The conversation ``cid`` (or a unique prefix of it), as an ``ollm.Conversation``."""
        full = self.resolve(cid)
        with self._guard("be read"):
            blobs = self.db.execute(
                "SELECT message FROM messages WHERE conversation_id = ? ORDER BY seq", (full,)
            ).fetchall()
        try:
            # Its log id as its id: the requests of a resumed conversation name it as before.
            return Conversation((_decode_message(row[0]) for row in blobs), id=full)
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
            raise LogsUnavailableError(
                f"The conversation {full} in {self.path} cannot be read back ({exc})."
            ) from None

    def info(self, cid: str) -> ConversationInfo:
        """What the log knows of one conversation."""
        found = self._infos("WHERE c.id = ?", (self.resolve(cid),), 1)
        return found[0]

    def latest(self) -> ConversationInfo | None:
        """The conversation written to last (a message or a response), if any."""
        found = self._infos("", (), 1)
        return found[0] if found else None

    def responses(self, cid: str) -> builtins.list[ResponseInfo]:
        """How each chat of the conversation ``cid`` went, in order."""
        full = self.resolve(cid)
        with self._guard("be read"):
            found = self.db.execute(
                f"SELECT {', '.join(rows.RESPONSE_COLUMNS)} FROM responses "
                "WHERE conversation_id = ? ORDER BY created_at, id",
                (full,),
            ).fetchall()
        return [
            ResponseInfo(datetime.fromisoformat(row[0]), int(row[1] or 0), *row[2:])
            for row in found
        ]

    def decisions(self, cid: str) -> builtins.list[DecisionInfo]:
        """Whether each tool call of the conversation ``cid`` could run, in order."""
        full = self.resolve(cid)
        with self._guard("be read"):
            found = self.db.execute(
                f"SELECT {', '.join(rows.DECISION_COLUMNS)} FROM decisions "
                "WHERE conversation_id = ? ORDER BY id",
                (full,),
            ).fetchall()
        return [
            DecisionInfo(
                created_at=datetime.fromisoformat(row[0]),
                messages_after=int(row[1] or 0),
                call_id=row[2],
                tool=row[3],
                args=row[4],
                decision=row[5],
                by=row[6],
                reason=row[7],
                scope=row[8],
            )
            for row in found
        ]

    def compactions(self, cid: str) -> builtins.list[CompactionInfo]:
        """Each compaction of the requests of the conversation ``cid``, in order."""
        full = self.resolve(cid)
        with self._guard("be read"):
            found = self.db.execute(
                f"SELECT {', '.join(rows.COMPACTION_COLUMNS)} FROM compactions "
                "WHERE conversation_id = ? ORDER BY id",
                (full,),
            ).fetchall()
        return [
            CompactionInfo(
                created_at=datetime.fromisoformat(row[0]),
                messages_after=int(row[1]),
                strategy=row[2],
                removed=int(row[3]),
                tokens_before=int(row[4]),
                tokens_after=int(row[5]),
            )
            for row in found
        ]

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
            values.append(rows.fts_query(query))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        return self._infos(where, tuple(values), max(1, limit))

    def _infos(
        self, where: str, values: tuple[object, ...], limit: int
    ) -> builtins.list[ConversationInfo]:
        order = "ORDER BY c.updated_at DESC, c.rowid DESC"
        sql = f"{rows.CONVERSATION_COLUMNS} {where} {order} LIMIT ?"
        with self._guard("be read"):
            found = rows.execute(self.db, sql, (*values, limit)).fetchall()
            shorts = [rows.short_id(self.db, row[0]) for row in found]
        infos = []
        for row, short in zip(found, shorts, strict=True):
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
                    short_id=short,
                    forked_from=row[10],
                    forked_at=row[11],
                )
            )
        return infos
