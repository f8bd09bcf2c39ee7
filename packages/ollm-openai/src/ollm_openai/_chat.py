"""``/chat/completions`` as a stream of provider events: the hot path of every reply.

One async generator reads the transport's bytes, splits Server-Sent Events, decodes each
``data:`` with msgspec into a typed chunk and yields a ``TextEvent`` for its text: no
task, queue or extra generator layer sits between the socket and the runtime.

Tool calls arrive as deltas (the first with the id and name, later ones with pieces of
the arguments, parallel calls interleaved by ``index``) and are given out, whole, when
the reply ends; a request with ``tool_call_deltas`` also gets each piece as it comes
(``ToolCallDeltaEvent``), at no cost to the others.

The reply ends at ``data: [DONE]``; a body that ends after a ``finish_reason`` without it
(some servers) is complete too; one that ends before is ``STREAM_INTERRUPTED``, and the
runtime keeps the partial reply.

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
    ErrorEvent,
    FinishEvent,
    FinishReason,
    NoticeEvent,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCallDeltaEvent,
    ToolCallEvent,
    Usage,
)
from ollm_openai._convert import ToolCallAssembler
from ollm_openai._errors import error_from_value, error_value, parse_error
from ollm_openai._wire import Chunk, Completion, Delta, ToolCallDelta, UsageWire

if TYPE_CHECKING:
    from ollm_http import FrameStream
    from ollm_openai._provider import OpenAIProvider

__all__ = ["stream_chat"]

log = logging.getLogger(__name__)

_decode_chunk = msgspec.json.Decoder(Chunk).decode
_decode_completion = msgspec.json.Decoder(Completion).decode


def usage_from(wire: UsageWire | None) -> Usage | None:
    """ollm's usage from the server's (``None`` when it sent none)."""
    if wire is None:
        return None
    prompt = wire.prompt_tokens or 0
    completion = wire.completion_tokens or 0
    prompt_details = wire.prompt_tokens_details
    completion_details = wire.completion_tokens_details
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=wire.total_tokens or prompt + completion,
        cached_tokens=prompt_details.cached_tokens if prompt_details is not None else None,
        reasoning_tokens=(
            completion_details.reasoning_tokens if completion_details is not None else None
        ),
    )


def _finish(reason: str | None) -> FinishReason:
    return "length" if reason == "length" else "stop"


class _Reply:
    """What one reply gathered besides its text: tool calls, finish reason, usage."""

    __slots__ = ("calls", "characters", "deltas", "fingerprint", "finish_reason", "text", "usage")

    def __init__(self, deltas: bool = False) -> None:
        self.calls = ToolCallAssembler()
        self.finish_reason: str | None = None
        self.fingerprint: str | None = None
        self.usage: UsageWire | None = None
        self.text = False
        # What the reply wrote (text, reasoning, arguments), for ollm's own count when
        # the server sends no usage.
        self.characters = 0
        self.deltas = deltas  # the chat asked to see calls as they are written

    def feed(self, calls: list[ToolCallDelta]) -> list[ToolCallDeltaEvent]:
        """Tool-call deltas to the assembler, their arguments counted."""
        for call in calls:
            if call.function is not None and isinstance(call.function.arguments, str):
                self.characters += len(call.function.arguments)
        return self.calls.feed(calls)

    def take(self, delta: Delta) -> list[ProviderEvent]:
        """The rarer parts of a delta: reasoning, tool-call pieces, a refusal."""
        events: list[ProviderEvent] = []
        reasoning = delta.reasoning_content or delta.reasoning
        if reasoning:
            self.characters += len(reasoning)
            events.append(ThinkingEvent(reasoning))
        if delta.tool_calls:
            pieces = self.feed(delta.tool_calls)
            if self.deltas:
                events.extend(pieces)
        if delta.refusal:
            self.text = True
            self.characters += len(delta.refusal)
            events.append(TextEvent(delta.refusal))
        return events

    def end(
        self,
        provider: OpenAIProvider,
        request: ProviderRequest,
        stream: FrameStream | None = None,
        *,
        done: bool = True,
    ) -> list[ProviderEvent]:
        """The reply's last events: its tool calls, a notice, the finish; for a body that
        ended before ``[DONE]`` and any finish reason, ``STREAM_INTERRUPTED`` (some
        servers end the body after the finish reason, without ``[DONE]``: that is whole)."""
        if stream is not None:
            if not done and self.finish_reason is None:
                if not self.text and not self.calls.calls():
                    return [_closed_empty(provider, request, stream)]
                return [stream.interrupted()]
            stream.done()
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
        if usage is None:
            usage = provider._estimated_usage(request, self.characters)
        else:
            provider._replied(request, usage)
        events.append(FinishEvent(_finish(self.finish_reason), usage))
        return events


async def stream_chat(
    provider: OpenAIProvider, request: ProviderRequest
) -> AsyncIterator[ProviderEvent]:
    """The events of one reply: ends with one ``FinishEvent``, or an ``ErrorEvent``."""
    streaming = provider.config.stream
    stream = provider.stream(
        "sse",
        model=request.model,
        abort=request.abort,
        affinity=request.conversation_id,
        headers=request.headers,
    )
    state = _Reply(request.tool_call_deltas)
    done = False
    try:
        for sent in await provider._send(stream, request, streaming=streaming):
            yield sent
        if not streaming:
            for event in _whole(provider, request, stream, await stream.whole()):
                yield event
            return
        reads, frames = stream.reads, stream.frames
        while not done:
            data = await reads()
            for sse in frames(data):
                text = sse.data
                if text == "[DONE]":
                    done = True
                    break
                if not text or text.isspace():
                    continue  # a keep-alive, or an event with no data
                try:
                    chunk = _decode_chunk(text)
                except (msgspec.DecodeError, RecursionError) as exc:
                    yield _undecodable(provider, stream, sse.event, text, exc)
                    return
                if chunk.error is not None or sse.event == "error":
                    yield _stream_error(provider, request.model, chunk, text)
                    return
                choices = chunk.choices
                if choices:
                    choice = choices[0]
                    delta = choice.delta
                    if delta is not None:
                        if delta.content:
                            state.text = True
                            state.characters += len(delta.content)
                            yield TextEvent(delta.content)
                        if (
                            delta.reasoning_content
                            or delta.reasoning
                            or delta.tool_calls
                            or (delta.refusal)
                        ):
                            for event in state.take(delta):
                                yield event
                    if choice.finish_reason:
                        state.finish_reason = choice.finish_reason
                        state.fingerprint = chunk.system_fingerprint
                state.usage = chunk.usage or state.usage
            if data is None:
                break
        notice = provider._window_notice(request, state.fingerprint)
        if notice is not None:
            yield notice
        for event in state.end(provider, request, stream, done=done):
            yield event
    except Exception as exc:
        yield stream.failure(exc)
    finally:
        await stream.aclose()


def _closed_empty(
    provider: OpenAIProvider, request: ProviderRequest, stream: FrameStream
) -> ProviderEvent:
    """A stream closed before any reply: ``STREAM_INTERRUPTED`` naming the prompt's size
    (ollm's own count) against the window, since that is what such a close usually means
    (llama-cpp-python's server answers a prompt over its window with 200 and an empty
    stream); ``CONTEXT_EXCEEDED`` when the window is known and the prompt is over it."""
    event = stream.interrupted()
    if type(event) is not ErrorEvent:
        return event  # cancelled
    tokens = provider._anchors.count(request)
    window = provider._known_window(request)
    who = f"The server at {provider.config.base_url}"
    closed = f"{who} closed the stream without a reply from {request.model!r}"
    if window is not None and tokens > window:
        return ErrorEvent(
            f"{closed}: the prompt was about {tokens:,} tokens, and the model's window is "
            f"{window:,}. Shorten it or start a new conversation, or raise the window "
            "(llama.cpp: --n_ctx / -c; vLLM: --max-model-len).",
            ErrorCode.CONTEXT_EXCEEDED,
        )
    if window is not None:
        sizes = f"the prompt was about {tokens:,} tokens, and the model's window is {window:,}"
    else:
        sizes = (
            f"the prompt was about {tokens:,} tokens, and the model's window is not known to "
            "ollm (context_window in the profile, or --context-window)"
        )
    return ErrorEvent(
        f"{closed}; {sizes}. A server does this to a prompt longer than its window: shorten "
        "it or raise the window (llama.cpp: --n_ctx / -c); else try again, and check the "
        "server's log.",
        ErrorCode.STREAM_INTERRUPTED,
    )


def _undecodable(
    provider: OpenAIProvider, stream: FrameStream, kind: str, text: str, exc: Exception
) -> ErrorEvent:
    """An event that is not JSON: an error in plain words (``event: error``), or a
    ``BAD_RESPONSE`` quoting it."""
    if kind == "error":
        return _stream_error(provider, stream.model or "", Chunk(), text)
    return stream.bad_frame(text, exc)


def _stream_error(provider: OpenAIProvider, model: str, chunk: Chunk, text: str) -> ErrorEvent:
    """An error sent in the middle of a stream: ``{"error": ...}``, or ``event: error``
    whose data is the error itself (``{"message": ...}``, or plain text)."""
    said = error_value(chunk.error) if chunk.error is not None else parse_error(None, text)
    error = error_from_value(said, config=provider.config, model=model, partial=True)
    return ErrorEvent(error.message, error.code)


def _whole(
    provider: OpenAIProvider, request: ProviderRequest, stream: FrameStream, content: bytes
) -> list[ProviderEvent]:
    """The events of a reply that came whole (``stream = false``)."""
    try:
        completion = _decode_completion(content)
    except (msgspec.DecodeError, RecursionError) as exc:
        return [stream.bad_frame(content, exc)]
    if completion.error is not None:
        said = error_value(completion.error)
        error = error_from_value(said, config=provider.config, model=request.model, partial=False)
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
                state.characters += len(text)
                events.append(TextEvent(text))
            if message.tool_calls:
                state.feed(message.tool_calls)
        state.finish_reason = choice.finish_reason
    state.usage = completion.usage
    return events + state.end(provider, request)
