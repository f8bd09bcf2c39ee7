"""A conversation: the history that carries across chats."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import msgspec

from ollm.errors import ConversationBusyError
from ollm.types.messages import Message, ToolCall

__all__ = ["Conversation"]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(list[Message])


class Conversation:
    """The messages of a conversation, in order (the system prompt is not one of them).

    Every chat appends to it: the user's message, then the assistant's replies and the
    tool results. Whatever fails, it stays valid: a reply cut short is kept and marked
    ``incomplete``, and every tool call has its result, so the next chat can go on.
    One chat at a time may run on a conversation.

    ``id`` names it in the conversation log, for middleware, and in every request
    (``ProviderRequest.conversation_id``): a random 32-hex-digit string unless one is
    given (the conversation log gives its own, so a resumed conversation keeps it). A
    pool, or a router in front of several servers, keys on it to send each turn to the
    server that holds the conversation's prompt in its cache.
    """

    __slots__ = ("_holder", "_messages", "id")

    def __init__(self, messages: Iterable[Message] = (), *, id: str | None = None) -> None:
        self._messages: list[Message] = list(messages)
        self._holder: object = None  # the chat running on it, if any
        if id is not None and (not isinstance(id, str) or not id):
            raise TypeError("a conversation's id must be a non-empty string")
        # os.urandom, not uuid or secrets: both cost more to import than the rest.
        self.id: str = id if id is not None else os.urandom(16).hex()

    @property
    def messages(self) -> tuple[Message, ...]:
        """A snapshot of the history."""
        return tuple(self._messages)

    @property
    def unanswered_calls(self) -> tuple[ToolCall, ...]:
        """The calls of the last reply that have no result yet (a chat was stopped while
        a person was asked about them); the next chat runs them first."""
        answered: set[str] = set()
        for message in reversed(self._messages):
            if message.role == "tool" and message.tool_call_id is not None:
                answered.add(message.tool_call_id)
            elif message.role == "assistant":
                return tuple(c for c in message.tool_calls if c.id not in answered)
            else:
                return ()
        return ()

    @property
    def busy(self) -> bool:
        """Whether a chat is running on this conversation."""
        return self._holder is not None

    def append(self, message: Message) -> None:
        """Add a message at the end."""
        if not isinstance(message, Message):
            raise TypeError(f"expected a Message, got {type(message).__name__}")
        self._messages.append(message)

    def extend(self, messages: Iterable[Message]) -> None:
        """Add several messages at the end."""
        for message in messages:
            self.append(message)

    def clear(self) -> None:
        """Forget every message."""
        self._check_idle()
        self._messages.clear()

    def fork(self) -> Conversation:
        """An independent copy, to try another path from here (with an ``id`` of its own)."""
        return Conversation(self._messages)

    def to_json(self) -> bytes:
        """The history as JSON, to save it."""
        return _encoder.encode(self._messages)

    @classmethod
    def from_json(cls, data: bytes | str, *, id: str | None = None) -> Conversation:
        """A conversation saved with ``to_json`` (``id``: the one it had, to keep it)."""
        return cls(_decoder.decode(data), id=id)

    def _replace(self, index: int, message: Message) -> None:
        # The chat that holds it puts a reply's calls as they finally ran in its place.
        self._messages[index] = message

    def _acquire(self, holder: object) -> None:
        self._check_idle()
        self._holder = holder

    def _release(self, holder: object) -> None:
        # Only by the chat that holds it: a chat stopped early is released when it is
        # left, and its generator, closed later, must not release the next chat's hold.
        if self._holder is holder:
            self._holder = None

    def _check_idle(self) -> None:
        if self._holder is not None:
            raise ConversationBusyError(
                "This conversation already has a chat in progress. Wait for it to finish, "
                "or use another conversation (conversation.fork())."
            )

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(list(self._messages))

    def __getitem__(self, index: int) -> Message:
        return self._messages[index]

    def __repr__(self) -> str:
        return f"<Conversation {len(self._messages)} messages>"
