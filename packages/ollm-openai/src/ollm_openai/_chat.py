"""``/chat/completions`` as a stream of provider events: the hot path of every reply.

One async generator reads the transport's bytes, splits Server-Sent Events, decodes each
``data:`` with msgspec into a typed chunk and yields a ``TextEvent`` for its text: no
task, queue or extra generator layer sits between the socket and the runtime.

Tool calls arrive as deltas (the first with the id and name, later ones with pieces of
the arguments, parallel calls interleaved by ``index``) and are given out, whole, when
the reply ends. The reply ends at ``data: [DONE]``; a body that ends after a
``finish_reason`` without it (some servers) is complete too; one that ends before is
``STREAM_INTERRUPTED``, and the runtime keeps the partial reply.

Abort: the wait for the response headers runs under the signal's guard; during the body
the signal shuts the socket (``ollm_http.abort_shuts_socket``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import msgspec

from ollm.errors import ErrorCode
from ollm.types import (
    AbortSignal,
    ErrorEvent,
    FinishEvent,
    FinishReason,
    NoticeEvent,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
    Usage,
)
from ollm_http import (
    BodyRead,
    EventSplitter,
    Reply,
    abort_shuts_socket,
    body_reader,
    drain,
    excerpt,
    failure_event,
)
from ollm_openai._convert import ToolCallAssembler
from ollm_openai._errors import error_from_value
from ollm_openai._wire import Chunk, Completion, UsageWire

if TYPE_CHECKING:
    from ollm_openai._provider import OpenAIProvider

__all__ = ["stream_chat"]

log = logging.getLogger(__name__)

_decode_chunk = msgspec.json.Decoder(Chunk).decode
_decode_completion = msgspec.json.Decoder(Completion).decode
# An SSE event can be large (a whole tool call, a long reasoning step); it is bounded.
MAX_EVENT_BYTES = 16 * 1024 * 1024


def usage_from(wire: UsageWire | None) -> Usage | None:
    """ollm's usage from the server's (``None`` when it sent none)."""
    if wire is None:
        return None
    prompt = wire.prompt_tokens or 0
    completion = wire.completion_tokens or 0
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=wire.total_tokens or prompt + completion,
    )


def _finish(reason: str | None) -> FinishReason:
    return "length" if reason == "length" else "stop"


class _Reply:
    """What one reply gathered besides its text: tool calls, finish reason, usage."""

    __slots__ = ("calls", "finish_reason", "text", "usage")

    def __init__(self) -> None:
        self.calls = ToolCallAssembler()
        self.finish_reason: str | None = None
        self.usage: UsageWire | None = None
        self.text = False

    def end(self, provider: OpenAIProvider, request: ProviderRequest) -> list[ProviderEvent]:
        events: list[ProviderEvent] = [ToolCallEvent(call) for call in self.calls.calls()]
        if self.finish_reason == "content_filter":
            events.append(
                NoticeEvent(
                    "The server's content filter stopped the reply"
                    + (" part way." if self.text else "."),
                    "content_filter",
                )
            )
        usage = usage_from(self.usage)
        provider._replied(request, usage)
        events.append(FinishEvent(_finish(self.finish_reason), usage))
        return events


async def stream_chat(
    provider: OpenAIProvider, request: ProviderRequest
) -> AsyncIterator[ProviderEvent]:
    """The events of one reply: ends with one ``FinishEvent``, or an ``ErrorEvent``."""
    abort = request.abort if request.abort is not None else AbortSignal()
    if abort.aborted:
        yield FinishEvent("cancelled")
        return
    http = provider._http
    model = request.model
    streaming = provider.config.stream
    reply: Reply | None = None
    reads: BodyRead | None = None
    unwatch = None
    finished = False
    state = _Reply()
    try:
        with abort.guard() as scope:
            reply = await provider._open_chat(request, stream=streaming)
        if scope.cancelled_caught or reply is None:
            yield FinishEvent("cancelled")
            return
        if not streaming:
            for event in await _whole(provider, request, reply, abort):
                yield event
            return
        response = reply.response
        reads = body_reader(response)
        unwatch = abort_shuts_socket(response, abort)
        splitter = EventSplitter(MAX_EVENT_BYTES)
        done = False
        while not done:
            ended = False
            try:
                if unwatch is None:
                    with abort.guard() as scope:
                        data = await reads()
                    if scope.cancelled_caught:
                        yield FinishEvent("cancelled")
                        return
                else:
                    data = await reads()
            except StopAsyncIteration:
                ended = True
            if _fired(abort):
                yield FinishEvent("cancelled")
                return
            for sse in splitter.end() if ended else splitter.feed(data):
                text = sse.data
                if text == "[DONE]":
                    done = True
                    break
                if not text or text.isspace():
                    continue  # a keep-alive, or an event with no data
                try:
                    chunk = _decode_chunk(text)
                except (msgspec.DecodeError, RecursionError) as exc:
                    if sse.event == "error":
                        chunk = Chunk(error=text)
                    else:
                        yield _bad_event(provider, model, text, exc)
                        return
                if chunk.error is not None or sse.event == "error":
                    error = error_from_value(
                        chunk.error if chunk.error is not None else text,
                        config=provider.config,
                        model=model,
                        partial=True,
                    )
                    yield ErrorEvent(error.message, error.code)
                    return
                choices = chunk.choices
                if choices:
                    choice = choices[0]
                    delta = choice.delta
                    if delta is not None:
                        content = delta.content
                        if content:
                            state.text = True
                            yield TextEvent(content)
                        reasoning = delta.reasoning_content or delta.reasoning
                        if reasoning:
                            yield ThinkingEvent(reasoning)
                        if delta.tool_calls:
                            state.calls.feed(delta.tool_calls)
                        if delta.refusal:
                            state.text = True
                            yield TextEvent(delta.refusal)
                    if choice.finish_reason:
                        state.finish_reason = choice.finish_reason
                if chunk.usage is not None:
                    state.usage = chunk.usage
            if ended:
                break
        if done or state.finish_reason is not None:
            finished = True
            for event in state.end(provider, request):
                yield event
            return
        yield ErrorEvent(
            f"The reply from {model!r} ended before the server said it was done (the "
            f"connection to {http.url} closed early). Try again; if it keeps happening, "
            "check the server's log.",
            ErrorCode.STREAM_INTERRUPTED,
        )
    except Exception as exc:
        yield failure_event(
            exc,
            abort,
            connection_error=lambda e: http.error(e, model=model, streaming=reply is not None),
            reading=f"Reading the reply from {http.url}",
            report="the server's name and version",
            logger=log,
        )
    finally:
        if unwatch is not None:
            unwatch()
        if reply is not None:
            if finished and reads is not None and not abort.aborted:
                await drain(reads)
            await reply.aclose()


async def _whole(
    provider: OpenAIProvider, request: ProviderRequest, reply: Reply, abort: AbortSignal
) -> list[ProviderEvent]:
    """The events of a reply that came whole (``stream = false``)."""
    with abort.guard() as scope:
        content = await reply.aread()
    if scope.cancelled_caught:
        return [FinishEvent("cancelled")]
    try:
        completion = _decode_completion(content)
    except (msgspec.DecodeError, RecursionError) as exc:
        return [_bad_event(provider, request.model, content.decode("utf-8", "replace"), exc)]
    if completion.error is not None:
        error = error_from_value(
            completion.error, config=provider.config, model=request.model, partial=False
        )
        return [ErrorEvent(error.message, error.code)]
    state = _Reply()
    events: list[ProviderEvent] = []
    if completion.choices:
        choice = completion.choices[0]
        message = choice.message or choice.delta
        if message is not None:
            reasoning = message.reasoning_content or message.reasoning
            if reasoning:
                events.append(ThinkingEvent(reasoning))
            text = message.content or message.refusal
            if text:
                state.text = True
                events.append(TextEvent(text))
            if message.tool_calls:
                state.calls.feed(message.tool_calls)
        state.finish_reason = choice.finish_reason
    state.usage = completion.usage
    return events + state.end(provider, request)


def _fired(abort: AbortSignal) -> bool:
    # A call, so that the type checker does not assume the signal cannot change.
    return abort.aborted


def _bad_event(provider: OpenAIProvider, model: str, text: str, exc: Exception) -> ErrorEvent:
    reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
    return ErrorEvent(
        f"The server at {provider.config.base_url} sent an event that is not a chat chunk "
        f"({reason}) in the reply from {model!r}: {excerpt(text.encode())}. Check that the "
        "address is an OpenAI-compatible API, not a proxy's page.",
        ErrorCode.BAD_RESPONSE,
    )
