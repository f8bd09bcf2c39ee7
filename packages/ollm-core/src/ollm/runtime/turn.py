"""A turn: one request to the provider, the reply it streams, and that reply's tool calls.

Internal: not part of ollm's public API (a step of ``ollm.ChatClient.chat``); its layout
may change in any release.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from ollm.runtime.conversation import Conversation
from ollm.runtime.provider_stream import not_an_event
from ollm.runtime.tool_runner import ToolOutcome, cancelled_outcome
from ollm.runtime.window import TRUNCATED, truncation_error
from ollm.types.depth import nests_deeper_than
from ollm.types.events import (
    ChatEvent,
    ErrorEvent,
    FinishEvent,
    FinishReason,
    NoticeEvent,
    ProviderEvent,
    ThinkingEvent,
    ToolCallDeltaEvent,
    ToolCallEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    Usage,
)
from ollm.types.messages import Message, ToolCall

__all__ = ["Turn", "tool_message"]


class Turn:
    """The state of one request, from the conversation as it stood to its commit.

    The chat loop feeds it the provider's events (text, thinking, calls, the finish or
    the error) and then commits it: the assistant's reply and one tool message per
    call go into the conversation together. A turn that cannot finish is abandoned:
    whatever streamed is kept, marked incomplete, and each call gets a result saying it
    did not run, so the history stays valid.
    """

    __slots__ = (
        "_ids",
        "_reply_at",
        "calls",
        "committed",
        "conversation",
        "error",
        "finish_reason",
        "number",
        "text_parts",
        "thinking_parts",
        "too_deep",
        "usage",
    )

    def __init__(self, number: int, conversation: Conversation) -> None:
        self.number = number
        self.conversation = conversation
        # The reply's text so far, one piece per event: the chat loop appends to it as
        # the text streams (a list append costs less than growing a string), so the
        # partial reply is here whenever the chat is left.
        self.text_parts: list[str] = []
        self.thinking_parts: list[str] = []
        self.calls: list[ToolCall] = []
        self.finish_reason: FinishReason = "stop"
        self.usage: Usage | None = None
        self.error: ErrorEvent | None = None
        self.committed = False
        # Where the reply sits in the history once it is there before its results
        # (committed while a person is asked about its calls), else None.
        self._reply_at: int | None = None
        self._ids: set[str] = set()
        self.too_deep: set[str] = set()

    @classmethod
    def resumed(cls, number: int, conversation: Conversation) -> Turn | None:
        """The turn of the history's last reply when some of its calls have no result (a
        chat stopped while a person was asked about them), else ``None``."""
        unanswered = conversation.unanswered_calls
        if not unanswered:
            return None
        turn = cls(number, conversation)
        turn.calls = list(unanswered)
        turn._ids = {call.id for call in unanswered}
        messages = conversation.messages
        turn._reply_at = max(i for i, m in enumerate(messages) if m.role == "assistant")
        return turn

    @property
    def text(self) -> str:
        """The reply's text so far."""
        parts = self.text_parts
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
        return parts[0] if parts else ""

    def add_call(self, call: ToolCall) -> ToolCall:
        """Queue a call; give it an id if it has none or repeats one of this turn.

        Arguments nested deeper than ``MAX_JSON_DEPTH`` are dropped from the call (the
        history must stay encodable) and its id goes into ``too_deep``: the call is
        answered with an argument error instead of running.
        """
        renumber = not call.id or call.id in self._ids
        deep = nests_deeper_than(call.args)
        if renumber or deep:
            # replace(), so that what else the call carries (its signature) stays.
            call = msgspec.structs.replace(
                call,
                id=f"call_{self.number}_{len(self.calls)}" if renumber else call.id,
                args={} if deep else call.args,
            )
        if deep:
            self.too_deep.add(call.id)
        self._ids.add(call.id)
        self.calls.append(call)
        return call

    def take(
        self, event: ProviderEvent, provider: str, *, stop_at_truncation: bool
    ) -> ChatEvent | None:
        """The stream step for every event but text (the chat loop keeps text inline,
        its hot path): record ``event`` in the turn and give what the caller sees of
        it, or ``None`` when the stream has ended (the finish, an error, a prompt the
        server cut when ``stop_at_truncation``, something that is not an event).
        """
        if type(event) is ThinkingEvent:
            self.thinking_parts.append(event.text)
            return event
        if type(event) is ToolCallEvent:
            return ToolCallStartEvent(self.add_call(event.call), self.number)
        if type(event) is FinishEvent:
            self.finish_reason = event.reason
            self.usage = event.usage
            return None
        if type(event) is ErrorEvent:
            self.error = event
            return None
        if type(event) is NoticeEvent:
            if stop_at_truncation and event.kind == TRUNCATED:
                self.error = truncation_error(event)
                return None
            return event
        if type(event) is ToolCallDeltaEvent:
            return event
        self.error = not_an_event(event, provider)
        return None

    @property
    def streamed_anything(self) -> bool:
        """Whether the reply produced any text, thinking or call."""
        return bool(self.text or self.thinking_parts or self.calls)

    def reply(self, *, incomplete: bool = False) -> Message:
        """The assistant message assembled from what streamed."""
        return Message.assistant(
            self.text,
            tool_calls=tuple(self.calls),
            thinking="".join(self.thinking_parts) or None,
            incomplete=incomplete,
        )

    @property
    def reply_index(self) -> int:
        """Where the reply sits in the history, once it is there ahead of its results."""
        if self._reply_at is None:
            raise LookupError("the reply is not in the history yet")
        return self._reply_at

    def commit_reply(self, message: Message) -> None:
        """Put the reply in the history ahead of its results (they follow with
        ``commit``); a second call replaces it (its calls as they finally ran)."""
        if self.committed:
            return
        if self._reply_at is None:
            self._reply_at = len(self.conversation)
            self.conversation.append(message)
        else:
            self.conversation._replace(self._reply_at, message)

    def commit(
        self,
        message: Message,
        outcomes: Sequence[ToolOutcome] = (),
        *,
        results: Sequence[Message] | None = None,
    ) -> None:
        """Add the reply and its tool results (``outcomes``, or their ``results``
        messages as they are) to the conversation, once."""
        if self.committed:
            return
        self.commit_reply(message)
        self.committed = True
        for result in results if results is not None else map(tool_message, outcomes):
            self.conversation.append(result)

    def abandon(
        self, why: str, keep: Callable[[Message], Message] | None = None
    ) -> list[ToolOutcome]:
        """Keep what streamed, marked incomplete; every call gets a 'did not run' result.

        ``keep`` makes each message what the history keeps (the middleware's plain
        ``on_message`` methods)."""
        if self.committed:
            return []
        outcomes = [cancelled_outcome(call, why) for call in self.calls]
        results = [tool_message(o) for o in outcomes]
        if keep is not None:
            results = [keep(m) for m in results]
        if self._reply_at is not None:
            self.commit(self.conversation[self._reply_at], results=results)
        elif self.streamed_anything:
            reply = self.reply(incomplete=True)
            self.commit(keep(reply) if keep is not None else reply, results=results)
        else:
            self.committed = True
        return outcomes

    def result_events(self, outcomes: Sequence[ToolOutcome]) -> list[ToolCallResultEvent]:
        """One result event per outcome, in call order."""
        return [
            ToolCallResultEvent(
                call=o.call,
                result=o.content,
                is_error=o.is_error,
                error_code=o.error_code,
                duration_ms=o.duration_ms,
                turn=self.number,
                images=o.images,
            )
            for o in outcomes
        ]


def tool_message(outcome: ToolOutcome) -> Message:
    """The history's message for a call's outcome."""
    return Message.tool(
        outcome.content, call=outcome.call, is_error=outcome.is_error, images=outcome.images
    )
