"""How ``ollm chat`` logs its conversation: after every answer, and never in the reply's way.

The log is opened only when it is needed (``ollm.logs`` imports ``sqlite3``). A log that
cannot be opened is a warning, and the chat goes on unlogged; a write that fails (a lock
held too long) is a warning too, and is tried again after the next answer, with what it
missed: the reply being printed is never lost to the log. ``-c``/``--cid`` need the log,
so there a failure to open it is an error.

What is logged is what a model answered: a prompt no model answered (refused as too
long, or the request failed) is recorded as a response with its error and the start of
the prompt, not as a message, so ``ollm chat -c`` never sends it again, and says so in
one line when it goes on without it. A prompt whose reply had begun to stream when it
broke (``STREAM_INTERRUPTED``: the server took it, perhaps mid tool call, where no text
is kept) is the conversation's, as an answered one is. When another
``ollm chat -c`` went on with the same conversation meanwhile, this session's exchange
goes to a new conversation that branches from it, with a note naming it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ollm.cli.driving import deferred_interrupts
from ollm.cli.terminal import Terminal
from ollm.errors import ErrorCode, OllmError
from ollm.runtime.conversation import Conversation
from ollm.types.events import (
    CompactionEvent,
    ErrorEvent,
    FinishEvent,
    OutputEvent,
    ToolDecisionEvent,
)
from ollm.types.messages import Message
from ollm.types.text import encode_json

if TYPE_CHECKING:
    from ollm.logs import ConversationInfo, LogStore

__all__ = ["ChatLog"]


@dataclass(frozen=True)
class _Exchange:
    """One chat waiting to be logged: its new messages (or its unanswered ones), how it
    went, and the decisions on its tool calls; ``final=False`` for the messages of a
    chat still under way (no response yet)."""

    messages: tuple[Message, ...]
    unanswered: tuple[Message, ...]
    response: dict[str, Any]
    decisions: tuple[ToolDecisionEvent, ...] = ()
    compactions: tuple[tuple[int, CompactionEvent], ...] = ()
    final: bool = True
    replaced: dict[int, Message] = field(default_factory=dict)


class ChatLog:
    """The log of one ``ollm chat`` session."""

    def __init__(self, store: LogStore | None, terminal: Terminal, *, write: bool) -> None:
        self.store = store
        self.terminal = terminal
        self.write = write
        self.cid: str | None = None
        self.saved = 0  # the session's messages already handled (logged, or pending)
        self.base = 0  # the messages of the logged conversation, as this session wrote them
        self._pending: list[_Exchange] = []
        self._failing = False
        self._checkpointed = False  # the chat under way logged its reply already
        self._early: dict[int, Message] = {}  # what it logged then, by position

    @classmethod
    def open(cls, args: argparse.Namespace, terminal: Terminal) -> ChatLog:
        """The session's log: read for ``-c``/``--cid``, written unless turned off."""
        from ollm.logs import LogStore, LogsUnavailableError, logging_enabled

        reads = bool(args.resume or args.cid)
        if args.no_log:
            # For the whole process: a plugin that would keep some of the conversation
            # (ollm-llamacpp's saved states) sees the log off, as with OLLM_LOGS=off.
            os.environ["OLLM_LOGS"] = "off"
        write = not args.no_log and logging_enabled()
        if not reads and not write:
            return cls(None, terminal, write=False)
        try:
            store = LogStore(readonly=not write)  # `-c --no-log` only reads
        except LogsUnavailableError as exc:
            if reads:
                raise
            terminal.warn(f"this conversation is not logged: {exc.message}")
            return cls(None, terminal, write=False)
        return cls(store, terminal, write=write)

    def resume(self, args: argparse.Namespace) -> tuple[Conversation, ConversationInfo] | None:
        """The conversation ``-c`` (the one written to last) or ``--cid`` asks to go on
        with; ``None`` for a new one."""
        if self.store is None or not (args.resume or args.cid):
            return None
        from ollm.logs import LogsUnavailableError

        info = self.store.info(args.cid) if args.cid else self.store.latest()
        if info is None:
            raise LogsUnavailableError(
                "There is no logged conversation to continue yet. Start one with: "
                'ollm chat -m MODEL "your question"'
            )
        conversation = self.store.load(info.id)
        self.cid = info.id
        self.saved = self.base = len(conversation.messages)
        last = self.store.responses(info.id)[-1:]
        if last and last[0].unanswered is not None and last[0].messages_after == self.saved:
            why = f" ({last[0].error_code})" if last[0].error_code else ""
            self.terminal.info(
                f"note: the last prompt of conversation {info.short_id or info.id} got no "
                f"answer{why} and is not part of it: this chat goes on without it.",
                "dim",
            )
        return conversation, info

    def recent_models(self, provider: str) -> list[str]:
        """The models the log's latest conversations used with ``provider``, latest first
        (none when nothing is logged or the log cannot be read)."""
        if self.store is None:
            return []
        try:
            infos = self.store.list(limit=50)
        except OllmError:
            return []
        return list(dict.fromkeys(i.model for i in infos if i.provider == provider and i.model))

    def new_conversation(self) -> None:
        """After ``/clear``: the next answer starts a new logged conversation."""
        self._flush()
        if self._pending:
            self.terminal.warn(
                f"{len(self._pending)} exchange(s) of the last conversation could not be logged."
            )
            self._pending.clear()
        self.cid = None
        self.saved = 0
        self.base = 0

    # An exchange is logged whole (with its bookkeeping), or not at all: a Ctrl-C during
    # ``record`` or a write waits until it is done (a KeyboardInterrupt half way through
    # would roll the whole exchange back).
    @deferred_interrupts()
    def record(
        self,
        conversation: Conversation,
        *,
        provider: str,
        model: str | None,
        system: str | None,
        finish: FinishEvent | None,
        error: ErrorEvent | None,
        duration_ms: float,
        decisions: Sequence[ToolDecisionEvent] = (),
        output_schema: dict[str, Any] | None = None,
        output: OutputEvent | None = None,
        compactions: Sequence[CompactionEvent] = (),
    ) -> int:
        """Log what the conversation gained since the last record, and how the chat went
        (with its ``compactions``, each where it happened in the conversation).

        Returns how many of the conversation's messages the session keeps: all of them,
        or, when no model answered the new prompt, those before it (the prompt is logged
        as unanswered, and must not be sent again with the next one).
        """
        messages = conversation.messages
        new = messages[self.saved :]
        if not new and finish is None:
            return len(messages)
        answered = (
            self._checkpointed
            or any(m.role == "assistant" for m in new)
            or (error is not None and error.code == ErrorCode.STREAM_INTERRUPTED)
        )
        # A reply logged early, whose calls changed before they ran, takes its final form.
        replaced = {
            i: messages[i] for i, m in self._early.items() if i < len(messages) and messages[i] != m
        }
        self._checkpointed = False
        self._early = {}
        if self.write and self.store is not None:
            response = {
                "provider": provider,
                "model": model,
                "system": system,
                "finish_reason": finish.reason if finish else None,
                "usage": finish.usage if finish else None,
                "duration_ms": duration_ms,
                "error_code": error.code if error else None,
                "error_message": error.message if error else None,
                "output_schema": output_schema,
                "output": None if output is None else encode_json(output.value).decode(),
            }
            self._pending.append(
                _Exchange(
                    new if answered else (),
                    () if answered else new,
                    response,
                    tuple(decisions),
                    # where each happened, among the messages logged now
                    tuple((c.conversation_length - self.saved, c) for c in compactions),
                    replaced=replaced,
                )
            )
            self._flush()
        if answered:
            self.saved = len(messages)
        return self.saved

    def checkpoint(
        self,
        conversation: Conversation,
        *,
        provider: str,
        model: str | None,
        system: str | None,
    ) -> None:
        """Log the messages so far of a chat still under way (a person is asked about its
        tool calls): a session stopped meanwhile leaves them in the log, and ``ollm chat
        --cid`` asks again. Its response is logged with the rest when it ends."""
        messages = conversation.messages
        new = messages[self.saved :]
        self._checkpointed = True
        self._early.update(enumerate(new, start=self.saved))
        if new and self.write and self.store is not None:
            details = {"provider": provider, "model": model, "system": system}
            self._pending.append(_Exchange(new, (), details, final=False))
            self._flush()
        self.saved = len(messages)

    @deferred_interrupts()
    def _flush(self) -> None:
        """Write the exchanges not logged yet, in order; stop at the first failure."""
        store = self.store
        if store is None or not self._pending:
            return
        from ollm.logs import LogsUnavailableError

        written = 0
        while self._pending:
            exchange = self._pending[0]
            try:
                cid = store.log_exchange(
                    self.cid,
                    exchange.messages,
                    base=self.base if self.cid is not None else None,
                    unanswered=exchange.unanswered,
                    decisions=exchange.decisions,
                    compactions=exchange.compactions,
                    response=exchange.final,
                    replaced=exchange.replaced,
                    **exchange.response,
                )
            except LogsUnavailableError as exc:
                if not self._failing:
                    self.terminal.warn(f"this answer is not logged: {exc.message}")
                self._failing = True
                return
            self._pending.pop(0)
            written += 1
            forked_from, self.cid = self.cid, cid
            self.base += len(exchange.messages)
            if forked_from is not None and cid != forked_from:
                self._forked(store, forked_from, cid)
        if self._failing:
            self._failing = False
            self.terminal.info(
                f"(the conversation log works again: {written} answers logged, the ones "
                "it missed included)",
                "dim",
            )

    def _forked(self, store: LogStore, parent: str, cid: str) -> None:
        """Another process went on with ``parent``: say where this session's log went."""
        from ollm.logs import LogsUnavailableError

        name = cid
        try:
            info = store.info(cid)
            name, self.base = info.short_id, info.messages
        except LogsUnavailableError:
            pass  # the note still names it; the count written is the best guess
        self.terminal.info(
            f"note: another ollm went on with conversation {parent} meanwhile, so this "
            f"exchange is logged as a new conversation, {name}, that branches from it "
            "(ollm chat -c goes on with it).",
            "dim",
        )

    def close(self) -> None:
        """Close the log."""
        if self.store is not None:
            self.store.close()
            self.store = None
