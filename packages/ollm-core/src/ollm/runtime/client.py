"""``ChatClient``: the entry point for chatting with a model."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ollm.errors import ErrorCode, OllmError, OutputInvalidError, error_from_code
from ollm.registries import Registries
from ollm.runtime.context import RunContext
from ollm.runtime.conversation import Conversation
from ollm.runtime.run import ChatRun
from ollm.runtime.settings import ChatSettings, ToolItem, as_policy
from ollm.tools.tool import Tool
from ollm.tools.toolset import Toolset, check_toolset_name, is_toolset
from ollm.types.abort import AbortSignal
from ollm.types.events import (
    ChatEvent,
    ErrorEvent,
    FinishEvent,
    FinishReason,
    OutputEvent,
    TextEvent,
    ToolCallResultEvent,
    Usage,
)
from ollm.types.messages import ImagePart, Message, Part, TextPart
from ollm.types.middleware import ApprovalScope, Approve, Deny
from ollm.types.provider import ProviderAdapter
from ollm.types.request import GenerationOptions

if TYPE_CHECKING:
    from ollm.runtime.approval import Approver
    from ollm.tools.approval import ApprovalPolicy, ApprovalRule

__all__ = ["ChatClient", "ChatResult", "ChatStream", "Prompt"]

T = TypeVar("T")

log = logging.getLogger(__name__)

Prompt = str | Message | Sequence[Part] | None
"""A user message as text, a ``Message``, parts (text and images), or ``None`` to send
the conversation as it stands."""


class ChatResult:
    """What ``ChatClient.run`` returns: the reply, the new messages, usage and why it ended."""

    __slots__ = (
        "error",
        "finish_reason",
        "has_output",
        "messages",
        "output",
        "text",
        "tool_results",
        "usage",
    )

    def __init__(
        self,
        text: str,
        messages: list[Message],
        usage: Usage,
        finish_reason: FinishReason,
        error: ErrorEvent | None,
        tool_results: list[ToolCallResultEvent],
    ) -> None:
        self.text = text
        self.messages = messages
        self.usage = usage
        self.finish_reason = finish_reason
        self.error = error
        self.tool_results = tool_results
        # The typed output's value, when the chat asked for one and got it.
        self.output: Any = None
        self.has_output = False

    @property
    def ok(self) -> bool:
        """The chat ended normally (``stop`` or ``length``)."""
        return self.error is None and self.finish_reason in ("stop", "length")

    def raise_for_error(self) -> ChatResult:
        """Raise the ``OllmError`` the chat ended with, if any; else return self."""
        if self.error is not None:
            raise _raised(self.error)
        return self

    def __repr__(self) -> str:
        return (
            f"ChatResult(finish_reason={self.finish_reason!r}, text={self.text[:60]!r}, "
            f"error={self.error!r})"
        )


class ChatStream:
    """The events of one chat: ``async for event in stream``.

    Also an async context manager (``async with client.chat(...) as stream``) that
    closes the chat, and its provider connection, on exit. ``abort()`` stops it from
    any task or thread: the chat ends with a ``finish`` event whose reason is
    ``cancelled``. An ``ApprovalRequestEvent`` waits for ``approve(id)`` or
    ``deny(id)`` (from any task or thread) unless the client has an ``approver``.
    """

    __slots__ = ("_iterator", "_run", "signal")

    def __init__(self, run: ChatRun) -> None:
        self._run = run
        self.signal = run.abort
        self._iterator: AsyncGenerator[ChatEvent, None] | None = None

    @property
    def conversation(self) -> Conversation:
        """The conversation this chat appends to."""
        return self._run.conversation

    def abort(self, reason: str = "aborted") -> None:
        """Stop the chat (thread-safe)."""
        self.signal.abort(reason)

    def approve(
        self,
        request_id: str,
        scope: ApprovalScope = "once",
        args: dict[str, Any] | None = None,
    ) -> bool:
        """Let the call of an ``ApprovalRequestEvent`` run (thread-safe).

        ``scope="chat"`` approves the tool's other calls in this chat too, ``"client"``
        in every chat of the client; ``args`` runs it with these arguments instead (the
        history keeps the model's too). ``False`` if it was answered already.
        """
        return self._run.board.answer(request_id, Approve(scope, args), "person")

    def deny(self, request_id: str, message: str = "a person declined it") -> bool:
        """Keep the call of an ``ApprovalRequestEvent`` from running (thread-safe): the
        model reads ``message`` as its result, and the chat goes on. ``False`` if it was
        answered already."""
        return self._run.board.answer(request_id, Deny(message), "person")

    def pending(self, request_id: str) -> bool:
        """Whether the approval request ``request_id`` still waits for an answer (one may
        have been answered with another: an approval for the chat answers them all)."""
        return self._run.board.pending(request_id)

    def __aiter__(self) -> AsyncIterator[ChatEvent]:
        # The generator itself, so that `async for` adds no layer of its own.
        if self._iterator is None:
            self._iterator = self._run.stream()
            _settle_when_left(self._iterator, self._run)
        return self._iterator

    async def __anext__(self) -> ChatEvent:
        return await self.__aiter__().__anext__()

    async def aclose(self) -> None:
        """Stop the chat and release its connection (the history stays valid)."""
        if self._iterator is not None:
            await self._iterator.aclose()

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _settle_when_left(generator: AsyncGenerator[ChatEvent, None], run: ChatRun) -> None:
    """Settle the chat the moment its generator is let go without being closed.

    After ``break`` (or when a stream is dropped), the event loop closes the generator
    later, in a task of its own; until then the conversation would stay busy and the
    partial reply out of the history. The loop learns of a generator through the
    thread's async-generator hooks when it is first advanced; this gives this one a
    finalizer that first settles the chat synchronously (``ChatRun.detach``) and then
    hands the generator to the loop's own finalizer, as usual. It costs nothing per
    event. Outside an event loop (no hooks), nothing changes.
    """
    firstiter, finalizer = sys.get_asyncgen_hooks()
    if finalizer is None:
        return

    def finalize(left: AsyncGenerator[Any, None]) -> None:
        try:
            run.detach()
        finally:
            finalizer(left)

    sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=finalize)
    try:
        # Creating the first step (not running it) is what reads the hooks.
        generator.__anext__().close()
    finally:
        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=finalizer)


class ChatClient:
    """Chat with models through any installed provider, with tools.

    ::

        client = ollm.ChatClient(model="llama3.2", tools=[get_weather])
        async for event in client.chat("What's the weather in Paris?"):
            if isinstance(event, ollm.TextEvent):
                print(event.text, end="")

    ``registries`` default to what installed plugins contribute (discovered on first
    need). Every setting of ``ChatSettings`` can be given here, as the client's default,
    and again to ``chat()`` or ``run()`` for one chat. The client keeps a conversation,
    so successive chats continue it; pass ``conversation=`` to use another.

    ``middleware`` wraps every request and tool call of its chats: names of installed
    middleware (``ollm plugins`` lists them; none runs unless named) and middleware
    objects, the first named outermost (see ``ollm.MiddlewareContext``). ``approval``
    rules decide which tool calls run, wait for a person, or never run; ``approver``
    answers the questions at once (else they are events of the stream, answered with
    ``stream.approve(id)``).

    Toolsets (an ``ollm_mcp.MCPServer``...) in ``tools`` offer all their tools;
    ``toolsets`` are there to be picked from by name or glob in ``tools``
    (``tools=["git_*"]``). The client opens a toolset on the first chat that needs it
    and keeps it open until ``aclose()`` (or the end of ``async with``); a toolset
    given only to one ``chat()`` is closed when that chat ends.
    """

    def __init__(
        self,
        registries: Registries | None = None,
        *,
        provider: str | ProviderAdapter | None = None,
        model: str | None = None,
        system: str | None = None,
        tools: Sequence[ToolItem] = (),
        tool_choice: str = "auto",
        options: GenerationOptions | None = None,
        max_turns: int = 10,
        max_tool_calls: int = 50,
        tool_timeout: float | None = 60.0,
        context_window: int | str | None = None,
        tool_strategy: str = "auto",
        recover_text_tool_calls: bool = True,
        think: bool | str | None = None,
        response_format: str | dict[str, Any] | None = None,
        conversation: Conversation | None = None,
        toolsets: Sequence[Toolset] = (),
        middleware: Sequence[str | object] = (),
        middleware_timeout: float | None = 5.0,
        approval: ApprovalPolicy | Sequence[ApprovalRule] | None = None,
        approver: Approver | None = None,
        tool_call_deltas: bool = False,
        output: Any = None,
        output_retries: int = 2,
        output_strategy: str = "auto",
        on_truncation: str = "notice",
        compact: str = "off",
        compact_at: float = 0.8,
    ) -> None:
        if registries is not None and not isinstance(registries, Registries):
            raise TypeError("registries must be an ollm.Registries")
        self._registries = registries
        self.toolsets = _collect_toolsets(toolsets, tools)
        self._context = RunContext(self)
        self.settings = ChatSettings(
            provider=provider,
            model=model,
            system=system,
            tools=_prepare_tools(tools),
            tool_choice=tool_choice,
            options=options or GenerationOptions(),
            max_turns=max_turns,
            max_tool_calls=max_tool_calls,
            tool_timeout=tool_timeout,
            context_window=context_window,
            tool_strategy=tool_strategy,
            recover_text_tool_calls=recover_text_tool_calls,
            think=think,
            response_format=response_format,
            middleware=middleware,
            middleware_timeout=middleware_timeout,
            approval=approval,  # type: ignore[arg-type]  # a list becomes a policy
            approver=approver,
            tool_call_deltas=tool_call_deltas,
            output=output,
            output_retries=output_retries,
            output_strategy=output_strategy,
            on_truncation=on_truncation,
            compact=compact,
            compact_at=compact_at,
        )
        self.conversation = conversation if conversation is not None else Conversation()

    @property
    def registries(self) -> Registries:
        """The registries in use (plugins are discovered the first time this is read)."""
        if self._registries is None:
            from ollm.plugins.loader import discover

            self._registries = discover()
        return self._registries

    def chat(
        self,
        prompt: Prompt = None,
        *,
        conversation: Conversation | None = None,
        abort: AbortSignal | None = None,
        provider: str | ProviderAdapter | None = None,
        model: str | None = None,
        system: str | None = None,
        tools: Sequence[ToolItem] | None = None,
        tool_choice: str | None = None,
        options: GenerationOptions | None = None,
        max_turns: int | None = None,
        max_tool_calls: int | None = None,
        tool_timeout: float | None = None,
        context_window: int | str | None = None,
        tool_strategy: str | None = None,
        recover_text_tool_calls: bool | None = None,
        think: bool | str | None = None,
        response_format: str | dict[str, Any] | None = None,
        middleware: Sequence[str | object] | None = None,
        middleware_timeout: float | None = None,
        approval: ApprovalPolicy | Sequence[ApprovalRule] | None = None,
        approver: Approver | None = None,
        tool_call_deltas: bool | None = None,
        output: Any = None,
        output_retries: int | None = None,
        output_strategy: str | None = None,
        on_truncation: str | None = None,
        compact: str | None = None,
        compact_at: float | None = None,
    ) -> ChatStream:
        """Start a chat; iterate the returned stream for its events.

        With no ``prompt``, the conversation is sent as it stands; if its last reply
        has calls that were never answered (a chat stopped while a person was asked
        about them), they are decided (asked about again) and run first.

        With ``output=T`` the chat asks for typed output (see ``ChatSettings``): it
        streams as usual, with ``PartialOutputEvent``s while the value streams, and ends
        with one ``OutputEvent`` holding a validated ``T``, or an ``OUTPUT_INVALID`` error.
        """
        settings = self.settings.with_overrides(
            provider=provider,
            model=model,
            system=system,
            tools=_prepare_tools(tools) if tools is not None else None,
            tool_choice=tool_choice,
            options=options,
            max_turns=max_turns,
            max_tool_calls=max_tool_calls,
            tool_timeout=tool_timeout,
            context_window=context_window,
            tool_strategy=tool_strategy,
            recover_text_tool_calls=recover_text_tool_calls,
            think=think,
            response_format=response_format,
            middleware=middleware,
            middleware_timeout=middleware_timeout,
            approval=as_policy(approval),
            approver=approver,
            tool_call_deltas=tool_call_deltas,
            output=output,
            output_retries=output_retries,
            output_strategy=output_strategy,
            on_truncation=on_truncation,
            compact=compact,
            compact_at=compact_at,
        )
        if abort is not None and not isinstance(abort, AbortSignal):
            raise TypeError("abort must be an ollm.AbortSignal")
        conversation = conversation if conversation is not None else self.conversation
        run = ChatRun(
            self._context, settings, conversation, _to_message(prompt), abort or AbortSignal()
        )
        return ChatStream(run)

    @overload
    async def run(self, prompt: Prompt = None, *, output: type[T], **kwargs: Any) -> T: ...

    @overload
    async def run(self, prompt: Prompt = None, *, output: object, **kwargs: Any) -> Any: ...

    @overload
    async def run(self, prompt: Prompt = None, **kwargs: Any) -> ChatResult: ...

    async def run(self, prompt: Prompt = None, **kwargs: Any) -> Any:
        """Run a chat to its end; return the final text, the new messages and usage.

        Takes the same keyword arguments as ``chat()``. Errors do not raise: they are in
        ``result.error`` (call ``result.raise_for_error()`` to raise them). No one sees
        its events, so a call that needs a person's approval is refused, unless an
        ``approver`` answers.

        With ``output=T`` (typed output, on this call or the client) it returns the
        validated ``T`` itself, and raises the ``OllmError`` the chat ended with instead:
        ``OutputInvalidError`` (its ``raw`` the model's last reply, its ``errors`` what
        was wrong) when the answer never matched; the history keeps every attempt.
        """
        result = await self._run(prompt, **kwargs)
        if kwargs.get("output") is None and self.settings.output is None:
            return result
        if result.error is not None:
            raise _raised(result.error)
        if not result.has_output:
            raise OutputInvalidError(
                f"The chat ended ({result.finish_reason}) before the model gave its value: "
                "raise max_turns to give it more turns, or offer fewer tools.",
                raw=result.text,
            )
        return result.output

    async def _run(self, prompt: Prompt = None, **kwargs: Any) -> ChatResult:
        stream = self.chat(prompt, **kwargs)
        stream._run.answerable = False
        conversation = stream.conversation
        start = len(conversation)
        text: list[str] = []
        results: list[ToolCallResultEvent] = []
        error: ErrorEvent | None = None
        finish = FinishEvent("error")
        output: list[OutputEvent] = []
        async with stream:
            async for event in stream:
                if isinstance(event, OutputEvent):
                    output.append(event)
                elif isinstance(event, TextEvent):
                    text.append(event.text)
                elif isinstance(event, ToolCallResultEvent):
                    results.append(event)
                    text.clear()  # the answer is the text after the last tool call
                elif isinstance(event, ErrorEvent):
                    error = event
                elif isinstance(event, FinishEvent):
                    finish = event
        result = ChatResult(
            text="".join(text),
            messages=list(conversation.messages[start:]),
            usage=finish.usage or Usage(),
            finish_reason=finish.reason,
            error=error,
            tool_results=results,
        )
        if output:
            result.output = output[-1].value
            result.has_output = True
        return result

    def compact_next(self) -> None:
        """Compact the next request of the client's conversation now, whatever its size:
        about half of what it would send is left out of it (old tool results, then the
        oldest turns; with ``compact`` off, as ``"auto"`` does). The conversation keeps
        every message."""
        self._context.compact_next.add(self.conversation.id)

    def new_conversation(self) -> Conversation:
        """Start afresh: the client's next chats use a new, empty conversation."""
        self.conversation = Conversation()
        return self.conversation

    async def aclose(self) -> None:
        """Close the toolsets this client opened and the providers its registries built."""
        try:
            await self._context.aclose()
        finally:
            if self._registries is not None:
                await self._registries.aclose()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _raised(error: ErrorEvent) -> OllmError:
    """The exception of an error event (an ``OUTPUT_INVALID`` one with its raw text and
    errors)."""
    if error.code == ErrorCode.OUTPUT_INVALID:
        return OutputInvalidError(error.message, raw=error.raw or "", errors=error.errors)
    return error_from_code(error.code, error.message)


def _prepare_tools(tools: Sequence[ToolItem]) -> tuple[str | Tool | Toolset, ...]:
    """Make functions into tools now, so a bad function raises at once."""
    if isinstance(tools, (str, bytes)):
        raise TypeError("tools must be a list of names or tools, not a string")
    prepared: list[str | Tool | Toolset] = []
    for item in tools:
        if isinstance(item, (str, Tool)):
            prepared.append(item)
        elif is_toolset(item):
            check_toolset_name(getattr(item, "name", None))
            prepared.append(item)
        elif callable(item):
            prepared.append(Tool.from_function(item))
        else:
            raise TypeError(f"a tool must be a name, a Tool or a function, not {item!r}")
    return tuple(prepared)


def _collect_toolsets(toolsets: object, tools: Sequence[ToolItem]) -> tuple[Toolset, ...]:
    """The client's toolsets: those given, and those among its tools; names are unique."""
    if (
        isinstance(toolsets, (str, bytes))
        or not isinstance(toolsets, Sequence)
        or not all(is_toolset(t) for t in toolsets)
    ):
        raise TypeError("toolsets must be a list of toolsets (objects with a name and open())")
    found: list[Toolset] = []
    for toolset in [*toolsets, *(t for t in tools if is_toolset(t))]:
        if any(toolset is known for known in found):
            continue
        name = check_toolset_name(toolset.name)
        if any(known.name == name for known in found):
            raise ValueError(
                f"two toolsets are named {name!r}: give each its own name, since the name "
                "prefixes its tools"
            )
        found.append(toolset)
    return tuple(found)


def _to_message(prompt: Prompt) -> Message | None:
    if prompt is None:
        return None
    if isinstance(prompt, str):
        return Message.user(prompt)
    if isinstance(prompt, Message):
        return prompt
    parts = tuple(prompt) if isinstance(prompt, Iterable) else ()
    if not parts or not all(isinstance(p, (TextPart, ImagePart)) for p in parts):
        raise TypeError("prompt must be text, a Message, or a list of TextPart and ImagePart")
    return Message(role="user", parts=parts)
