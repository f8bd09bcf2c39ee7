"""How ``ollm chat`` logs its conversation: after every answer, and never in the reply's way.

The log is opened only when it is needed (``ollm.logs`` imports ``sqlite3``). A log that
cannot be opened or written is a warning, and the chat goes on unlogged: the reply being
printed is never lost to it. ``-c``/``--cid`` need the log, so there a failure is an error.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ollm.cli.terminal import Terminal
from ollm.runtime.conversation import Conversation
from ollm.types.events import ErrorEvent, FinishEvent

if TYPE_CHECKING:
    from ollm.logs import ConversationInfo, LogStore

__all__ = ["ChatLog"]


class ChatLog:
    """The log of one ``ollm chat`` session."""

    def __init__(self, store: LogStore | None, terminal: Terminal, *, write: bool) -> None:
        self.store = store
        self.terminal = terminal
        self.write = write
        self.cid: str | None = None
        self.saved = 0

    @classmethod
    def open(cls, args: argparse.Namespace, terminal: Terminal) -> ChatLog:
        """The session's log: read for ``-c``/``--cid``, written unless turned off."""
        from ollm.logs import LogStore, LogsUnavailableError, logging_enabled

        reads = bool(args.resume or args.cid)
        write = not args.no_log and logging_enabled()
        if not reads and not write:
            return cls(None, terminal, write=False)
        try:
            store = LogStore()
        except LogsUnavailableError as exc:
            if reads:
                raise
            terminal.warn(f"this conversation is not logged: {exc.message}")
            return cls(None, terminal, write=False)
        return cls(store, terminal, write=write)

    def resume(self, args: argparse.Namespace) -> tuple[Conversation, ConversationInfo] | None:
        """The conversation ``-c`` or ``--cid`` asks to go on with (``None`` for a new one)."""
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
        self.saved = len(conversation.messages)
        return conversation, info

    def new_conversation(self) -> None:
        """After ``/clear``: the next answer starts a new logged conversation."""
        self.cid = None
        self.saved = 0

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
    ) -> None:
        """Save what the conversation gained since the last record, and how the chat went."""
        store = self.store
        if store is None or not self.write:
            return
        from ollm.logs import LogsUnavailableError

        messages = conversation.messages
        if len(messages) <= self.saved and finish is None:
            return
        try:
            self.cid = store.log_exchange(
                self.cid,
                messages[self.saved :],
                provider=provider,
                model=model,
                system=system,
                finish_reason=finish.reason if finish else None,
                usage=finish.usage if finish else None,
                duration_ms=duration_ms,
                error_code=error.code if error else None,
                error_message=error.message if error else None,
            )
            self.saved = len(messages)
        except LogsUnavailableError as exc:
            self.terminal.warn(f"the conversation log stopped: {exc.message}")
            self.store = None

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
