"""Mock providers that are real providers: script a model's replies, or compute them.

``ScriptedProvider`` answers each request with the next ``Reply`` of its script and
records every request; ``FunctionProvider`` asks a function. Both honour the abort
signal (``handles_abort = True``), so a test can abort a chat at any point, and both
report capabilities (tools, context window) when given some. Given ``models=`` they
also manage models (``ModelManagement``), and given ``embedding_dimensions=`` they
embed texts (``Embeddings``).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any

import anyio

from ollm.errors import ErrorCode, OllmError
from ollm.types import (
    AbortSignal,
    ErrorEvent,
    FinishEvent,
    FinishReason,
    ModelCapabilities,
    ModelInfo,
    NoticeEvent,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    Usage,
)
from ollm_testutils.capabilities import MockEmbeddings, MockModels

__all__ = [
    "FunctionProvider",
    "MockEmbeddings",
    "MockModels",
    "MockProvider",
    "Reply",
    "ScriptedProvider",
]

CallSpec = ToolCall | tuple[str, dict[str, Any]]


class Reply:
    """One scripted reply: what the model "says", in order, and how the reply ends.

    Events come out as: the notice, thinking chunks, text chunks, tool calls, then the
    ending, which is the first that applies of ``error`` (an error event), ``raises``
    (the stream raises it), ``hang`` (waits until the chat is aborted), or a finish
    event with ``finish`` and ``usage``. ``text`` and ``thinking`` are one chunk when a
    string, several when a list. ``delay`` waits before every event; ``first_delay``
    before the first one only (a slow first byte). ``events=`` gives the raw events
    instead, and nothing else is added to them.
    """

    __slots__ = (
        "_events",
        "delay",
        "error",
        "finish",
        "first_delay",
        "hang",
        "notice",
        "raises",
        "text",
        "thinking",
        "tool_calls",
        "usage",
    )

    def __init__(
        self,
        text: str | Sequence[str] = (),
        *,
        thinking: str | Sequence[str] = (),
        tool_calls: Sequence[CallSpec] = (),
        finish: FinishReason = "stop",
        usage: Usage | None = None,
        error: ErrorEvent | OllmError | None = None,
        raises: BaseException | None = None,
        hang: bool = False,
        delay: float = 0.0,
        first_delay: float = 0.0,
        notice: str | None = None,
        events: Sequence[ProviderEvent] | None = None,
    ) -> None:
        self.text = [text] if isinstance(text, str) else list(text)
        self.thinking = [thinking] if isinstance(thinking, str) else list(thinking)
        self.tool_calls = list(tool_calls)
        self.finish = finish
        self.usage = usage
        self.error = error
        self.raises = raises
        self.hang = hang
        self.delay = delay
        self.first_delay = first_delay
        self.notice = notice
        self._events = list(events) if events is not None else None

    @classmethod
    def from_events(cls, events: Iterable[ProviderEvent], *, delay: float = 0.0) -> Reply:
        """A reply made of exactly these events."""
        return cls(events=list(events), delay=delay)

    @classmethod
    def connection_error(cls, url: str = "http://127.0.0.1:11434") -> Reply:
        """The server cannot be reached."""
        return cls(
            error=ErrorEvent(
                f"The server is not running at {url}. Start it, then try again.",
                ErrorCode.CONNECTION_FAILED,
            )
        )

    @classmethod
    def error_midstream(
        cls,
        text: str | Sequence[str] = "partial",
        message: str = "the model stopped in the middle of its reply",
        code: str = ErrorCode.STREAM_INTERRUPTED,
    ) -> Reply:
        """Some text, then an error instead of a finish."""
        return cls(text, error=ErrorEvent(message, code))

    @classmethod
    def hanging(cls, text: str | Sequence[str] = ()) -> Reply:
        """Some text, then nothing until the chat is aborted."""
        return cls(text, hang=True)

    @classmethod
    def slow_first_byte(cls, text: str | Sequence[str], delay: float) -> Reply:
        """A reply whose first event comes only after ``delay`` seconds."""
        return cls(text, first_delay=delay)

    @classmethod
    def calling(cls, *calls: CallSpec, text: str | Sequence[str] = ()) -> Reply:
        """A reply that calls tools: ``Reply.calling(("get_weather", {"city": "Paris"}))``."""
        return cls(text, tool_calls=calls)

    def events(self, number: int) -> list[ProviderEvent]:
        """The events of this reply; tool calls without ids get ``call_<number>_<i>``."""
        if self._events is not None:
            return list(self._events)
        events: list[ProviderEvent] = []
        if self.notice:
            events.append(NoticeEvent(self.notice, "info"))
        events.extend(ThinkingEvent(chunk) for chunk in self.thinking)
        events.extend(TextEvent(chunk) for chunk in self.text)
        for index, spec in enumerate(self.tool_calls):
            if isinstance(spec, ToolCall):
                call = spec
            else:
                name, args = spec
                call = ToolCall(id=f"call_{number}_{index}", name=name, args=dict(args))
            events.append(ToolCallEvent(call))
        if self.error is not None:
            error = self.error
            if isinstance(error, OllmError):
                error = ErrorEvent(error.message, error.code)
            events.append(error)
        elif self.raises is None and not self.hang:
            events.append(FinishEvent(self.finish, self.usage))
        return events

    def __repr__(self) -> str:
        return f"Reply(text={self.text!r}, tool_calls={self.tool_calls!r}, finish={self.finish!r})"


class MockProvider:
    """What the mock providers share: recorded requests, capabilities, abort handling.

    ``capabilities`` is what ``model_capabilities`` reports (all unknown by default).
    ``token_counter`` makes the provider count tokens (``TokenCounting``) with it;
    without one, it does not count and the runtime estimates. ``models`` (names,
    ``ModelInfo``s or a ``MockModels``) makes it manage models (``ModelManagement``:
    list, show, pull with progress, delete); ``embedding_dimensions`` makes it embed
    texts (``Embeddings``) into deterministic unit vectors of that size.
    """

    handles_abort = True

    def __init__(
        self,
        name: str,
        *,
        default_model: str | None = "mock-model",
        capabilities: ModelCapabilities | None = None,
        token_counter: Callable[[ProviderRequest], int] | None = None,
        models: MockModels | Iterable[ModelInfo | str] | None = None,
        embedding_dimensions: int | None = None,
    ) -> None:
        self.name = name
        self.default_model = default_model
        self.capabilities = capabilities or ModelCapabilities()
        self.requests: list[ProviderRequest] = []
        self.open_streams = 0
        self.closed = False
        if token_counter is not None:
            counter = token_counter

            async def count_tokens(request: ProviderRequest) -> int:
                return counter(request)

            # An instance attribute, so that only a counting mock is a TokenCounting.
            self.count_tokens = count_tokens
        self.models: MockModels | None = None
        if models is not None:
            store = models if isinstance(models, MockModels) else MockModels(models, provider=name)
            self.models = store
            self.list_models = store.list_models
            self.show_model = store.show_model
            self.pull_model = store.pull_model
            self.stream_pull = store.stream_pull
            self.delete_model = store.delete_model
        self.embeddings: MockEmbeddings | None = None
        if embedding_dimensions is not None:
            self.embeddings = MockEmbeddings(embedding_dimensions)
            self.embed = self.embeddings.embed

    async def model_capabilities(self, model: str) -> ModelCapabilities:
        """What the test said the model can do."""
        return self.capabilities

    async def aclose(self) -> None:
        """Mark the provider closed (tests check it)."""
        self.closed = True

    async def _play(
        self, reply: Reply, request: ProviderRequest, number: int
    ) -> AsyncIterator[ProviderEvent]:
        abort = request.abort or AbortSignal()
        self.open_streams += 1
        try:
            for index, event in enumerate(reply.events(number)):
                wait = reply.delay + (reply.first_delay if index == 0 else 0.0)
                if wait > 0 and not await _sleep(wait, abort):
                    return
                if abort.aborted:
                    return
                yield event
            if reply.raises is not None:
                raise reply.raises
            if reply.hang:
                await abort.wait()
        finally:
            self.open_streams -= 1


async def _sleep(seconds: float, abort: AbortSignal) -> bool:
    """Sleep unless aborted; False if the abort cut it short."""
    with abort.guard() as scope:
        await anyio.sleep(seconds)
    return not scope.cancelled_caught


class ScriptedProvider(MockProvider):
    """Answers each request with the next reply of its script; records the requests.

    ::

        provider = ScriptedProvider(
            Reply(tool_calls=[("get_weather", {"city": "Paris"})]),
            Reply("It is sunny in Paris."),
        )

    A plain string is a text reply. With ``repeat_last=True`` the last reply answers
    every request after the script ends; otherwise such a request gets an error event.
    """

    def __init__(
        self,
        *replies: Reply | str,
        name: str = "scripted",
        repeat_last: bool = False,
        default_model: str | None = "mock-model",
        capabilities: ModelCapabilities | None = None,
        token_counter: Callable[[ProviderRequest], int] | None = None,
        models: MockModels | Iterable[ModelInfo | str] | None = None,
        embedding_dimensions: int | None = None,
    ) -> None:
        super().__init__(
            name,
            default_model=default_model,
            capabilities=capabilities,
            token_counter=token_counter,
            models=models,
            embedding_dimensions=embedding_dimensions,
        )
        self.script: list[Reply] = []
        self.repeat_last = repeat_last
        self.add(*replies)

    def add(self, *replies: Reply | str) -> ScriptedProvider:
        """Append replies to the script."""
        self.script.extend(Reply(r) if isinstance(r, str) else r for r in replies)
        return self

    @property
    def remaining(self) -> int:
        """Replies not used yet."""
        return max(0, len(self.script) - len(self.requests))

    def chat_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Play the next reply."""
        self.requests.append(request)
        number = len(self.requests)
        if number <= len(self.script):
            reply = self.script[number - 1]
        elif self.repeat_last and self.script:
            reply = self.script[-1]
        else:
            reply = Reply(
                error=ErrorEvent(
                    f"ScriptedProvider has no reply left for request {number} "
                    f"(the script has {len(self.script)}). Add one with provider.add(...).",
                    ErrorCode.PROVIDER_ERROR,
                )
            )
        return self._play(reply, request, number)


Decision = Reply | str | Iterable[ProviderEvent] | AsyncIterable[ProviderEvent]


class FunctionProvider(MockProvider):
    """A provider whose replies a function computes from each request.

    The function (sync or async) returns a ``Reply``, a string, or the events
    themselves (a list or an async iterator).
    """

    def __init__(
        self,
        function: Callable[[ProviderRequest], Decision | Awaitable[Decision]],
        *,
        name: str = "function",
        default_model: str | None = "mock-model",
        capabilities: ModelCapabilities | None = None,
        token_counter: Callable[[ProviderRequest], int] | None = None,
        models: MockModels | Iterable[ModelInfo | str] | None = None,
        embedding_dimensions: int | None = None,
    ) -> None:
        super().__init__(
            name,
            default_model=default_model,
            capabilities=capabilities,
            token_counter=token_counter,
            models=models,
            embedding_dimensions=embedding_dimensions,
        )
        self.function = function
        self._numbers = itertools.count(1)

    async def chat_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Ask the function, then play what it decided."""
        self.requests.append(request)
        number = next(self._numbers)
        decision = self.function(request)
        if inspect.isawaitable(decision):
            decision = await decision
        if isinstance(decision, str):
            decision = Reply(decision)
        if isinstance(decision, Reply):
            async for event in self._play(decision, request, number):
                yield event
        elif isinstance(decision, AsyncIterable):
            iterator = decision.__aiter__()
            try:
                async for event in iterator:
                    yield event
            finally:
                # Closing this stream must close the function's stream too, at once.
                aclose = getattr(iterator, "aclose", None)
                if aclose is not None:
                    await aclose()
        else:
            for event in decision:
                yield event
