"""``EventCollector``: gather a stream's events, then ask questions about them."""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Iterator
from typing import Any, TypeVar, overload

from ollm.types import (
    ChatEvent,
    ErrorEvent,
    FinishEvent,
    FinishReason,
    NoticeEvent,
    ProviderEvent,
    TextEvent,
    ThinkingEvent,
    TokenWarningEvent,
    ToolCall,
    ToolCallEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    TurnCompleteEvent,
    Usage,
)

__all__ = ["EventCollector"]

Event = ChatEvent | ProviderEvent
E = TypeVar("E")


class EventCollector:
    """The events of a chat (or of a provider's stream), and what they add up to.

    ::

        events = await EventCollector().collect(client.chat("What's 2+2?"))
        assert events.finish_reason == "stop"
        assert events.tool_calls[0].name == "calculate"
        assert "4" in events.final_text

    It is also a callback (``collector(event)``) for code that reports events one by
    one, and ``collect_sync`` takes a ``SyncChatClient``'s iterator.
    """

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self.events: list[Event] = list(events)

    # -- gathering --------------------------------------------------------------------

    def add(self, event: Event) -> None:
        """Record one event."""
        self.events.append(event)

    __call__ = add

    async def collect(self, stream: AsyncIterable[Any]) -> EventCollector:
        """Consume ``stream`` to its end, then close it; returns this collector.

        Closing releases the provider's connection at once, even when the test is
        cancelled in the middle of the stream.
        """
        try:
            async for event in stream:
                self.events.append(event)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return self

    def collect_sync(self, stream: Iterable[Any]) -> EventCollector:
        """Consume a synchronous iterator of events; returns this collector."""
        self.events.extend(stream)
        return self

    def clear(self) -> None:
        """Forget every event."""
        self.events.clear()

    # -- questions --------------------------------------------------------------------

    @overload
    def of_type(self, kind: type[E]) -> list[E]: ...
    @overload
    def of_type(self, kind: tuple[type[Any], ...]) -> list[Any]: ...
    def of_type(self, kind: Any) -> list[Any]:
        """The events of that class (or classes), in order."""
        return [event for event in self.events if isinstance(event, kind)]

    @property
    def types(self) -> list[str]:
        """The ``type`` tag of each event, in order (``["text", "text", "finish"]``)."""
        return [str(type(event).__struct_config__.tag) for event in self.events]

    @property
    def text(self) -> str:
        """All the text, every turn joined."""
        return "".join(event.text for event in self.of_type(TextEvent))

    @property
    def final_text(self) -> str:
        """The text after the last tool result: the answer, as ``ChatClient.run`` gives it."""
        pieces: list[str] = []
        for event in self.events:
            if isinstance(event, TextEvent):
                pieces.append(event.text)
            elif isinstance(event, ToolCallResultEvent):
                pieces.clear()
        return "".join(pieces)

    @property
    def thinking(self) -> str:
        """All the reasoning text."""
        return "".join(event.text for event in self.of_type(ThinkingEvent))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """Every tool call the model made, in order."""
        calls: list[ToolCall] = []
        for event in self.events:
            if isinstance(event, (ToolCallStartEvent, ToolCallEvent)):
                calls.append(event.call)
        return calls

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools called, in order."""
        return [call.name for call in self.tool_calls]

    @property
    def tool_results(self) -> list[ToolCallResultEvent]:
        """Every tool result, in order."""
        return self.of_type(ToolCallResultEvent)

    @property
    def errors(self) -> list[ErrorEvent]:
        """Every error event."""
        return self.of_type(ErrorEvent)

    @property
    def error(self) -> ErrorEvent | None:
        """The first error event, or ``None``."""
        errors = self.errors
        return errors[0] if errors else None

    @property
    def error_codes(self) -> list[str]:
        """The codes of the error events."""
        return [event.code for event in self.errors]

    @property
    def notices(self) -> list[NoticeEvent]:
        """Every notice."""
        return self.of_type(NoticeEvent)

    @property
    def warnings(self) -> list[TokenWarningEvent]:
        """Every token warning."""
        return self.of_type(TokenWarningEvent)

    @property
    def turns(self) -> list[TurnCompleteEvent]:
        """One event per completed turn."""
        return self.of_type(TurnCompleteEvent)

    @property
    def finish(self) -> FinishEvent | None:
        """The last finish event, or ``None`` if the stream has not finished."""
        finishes = self.of_type(FinishEvent)
        return finishes[-1] if finishes else None

    @property
    def finish_reason(self) -> FinishReason | None:
        """Why the stream ended, or ``None`` if it did not."""
        finish = self.finish
        return finish.reason if finish is not None else None

    @property
    def usage(self) -> Usage | None:
        """The usage the finish event reported."""
        finish = self.finish
        return finish.usage if finish is not None else None

    # -- assertions -------------------------------------------------------------------

    def assert_ok(self) -> EventCollector:
        """Fail unless the stream ended normally (stop or length) with no error."""
        reason = self.finish_reason
        if self.errors or reason not in ("stop", "length"):
            raise AssertionError(
                f"expected a normal finish, got finish={reason!r} and errors="
                f"{[(e.code, e.message) for e in self.errors]!r}; events: {self.types}"
            )
        return self

    def assert_error(self, code: str) -> ErrorEvent:
        """Fail unless an error event with ``code`` was seen; return it."""
        for event in self.errors:
            if event.code == code:
                return event
        raise AssertionError(f"expected an error {code!r}, got {self.error_codes!r}")

    def assert_well_formed(self) -> EventCollector:
        """Fail unless the stream ended with exactly one finish event, last."""
        finishes = [i for i, event in enumerate(self.events) if isinstance(event, FinishEvent)]
        if len(finishes) != 1 or finishes[0] != len(self.events) - 1:
            raise AssertionError(f"expected exactly one finish event, last; got {self.types}")
        return self

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __getitem__(self, index: int) -> Event:
        return self.events[index]

    def __repr__(self) -> str:
        return f"EventCollector({self.types})"
