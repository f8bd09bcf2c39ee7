"""``streamGenerateContent?alt=sse`` as a stream of provider events.

Each Server-Sent Event is a whole ``GenerateContentResponse``: text parts become
``TextEvent``, parts marked ``thought`` become ``ThinkingEvent``, ``functionCall`` parts
are gathered (several per event, from any event) and given out, whole, when the reply
ends, each with its ``thoughtSignature``. The stream has no end marker: a reply is
complete when the body ends after a ``finishReason``; one that ends before is
``STREAM_INTERRUPTED``, and the runtime keeps the partial reply.

Finish reasons (WIRE.md): ``STOP`` is ``stop``, ``MAX_TOKENS`` ``length``; a safety
block (``SAFETY``, ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``...)
is a ``CONTENT_BLOCKED`` error naming the reason and the categories, or a notice when
part of the reply was already shown; ``MALFORMED_FUNCTION_CALL`` sends the model a
correction once (a notice says so), and fails with ``BAD_RESPONSE`` the second time.

Abort: the wait for the response headers runs under the signal's guard; during the body
the signal shuts the socket (``ollm_http.abort_shuts_socket``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import msgspec

from ollm.errors import ErrorCode
from ollm.kit import new_call_id
from ollm.types import (
    AbortSignal,
    ErrorEvent,
    FinishEvent,
    NoticeEvent,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    Usage,
)
from ollm_gemini._convert import thinking_notice
from ollm_gemini._errors import api_error, error_from_reply
from ollm_gemini._wire import Candidate, GenerateResponse, SafetyRating, UsageMetadata

if TYPE_CHECKING:
    from ollm_gemini._provider import GeminiProvider
    from ollm_http import FrameStream

__all__ = ["BLOCKED", "stream_chat", "usage_from"]

log = logging.getLogger(__name__)

_decode = msgspec.json.Decoder(GenerateResponse).decode

# Finish reasons that mean a filter stopped the reply, and how to say why.
BLOCKED = {
    "SAFETY": "it was flagged for safety",
    "RECITATION": "it recited copyrighted material",
    "BLOCKLIST": "it contained a term of the block list",
    "PROHIBITED_CONTENT": "it may contain prohibited content",
    "SPII": "it may contain sensitive personal information",
    "IMAGE_SAFETY": "a generated image was flagged for safety",
    "LANGUAGE": "it is in a language the model does not support",
    "OTHER": "of an unspecified reason",
}
_MALFORMED = ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL")
CORRECTION = (
    "Your last function call could not be parsed{said}. Call the function again with "
    "arguments written as one JSON object that matches its declaration, or answer "
    "without calling it."
)


def usage_from(wire: UsageMetadata | None) -> Usage | None:
    """ollm's usage from ``usageMetadata`` (``None`` when the API sent none)."""
    if wire is None:
        return None
    prompt = wire.promptTokenCount or 0
    thoughts = wire.thoughtsTokenCount
    completion = (wire.candidatesTokenCount or 0) + (thoughts or 0)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=wire.totalTokenCount or prompt + completion,
        reasoning_tokens=thoughts,
        cached_tokens=wire.cachedContentTokenCount,
    )


def _categories(ratings: list[SafetyRating] | None) -> str:
    flagged = [
        (r.category or "").removeprefix("HARM_CATEGORY_").replace("_", " ").lower()
        for r in ratings or ()
        if r.blocked or r.probability in ("HIGH", "MEDIUM")
    ]
    return f" ({', '.join(c for c in flagged if c)})" if any(flagged) else ""


class _Reply:
    """What one reply gathered: whether text showed, calls, finish reason, usage."""

    __slots__ = ("calls", "finish", "finish_message", "ratings", "shown", "thought", "usage")

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.finish: str | None = None
        self.finish_message: str | None = None
        self.ratings: list[SafetyRating] | None = None
        self.usage: UsageMetadata | None = None
        self.shown = False
        self.thought = False

    def take(self, candidate: Candidate) -> list[ProviderEvent]:
        """The events of one candidate's parts; calls are kept for the end."""
        events: list[ProviderEvent] = []
        content = candidate.content
        for part in (content.parts if content is not None else None) or ():
            call = part.functionCall
            if call is not None:
                args = call.args
                call_id = call.id or new_call_id()
                name = call.name or ""
                if args is None:
                    args = {}
                if isinstance(args, dict):
                    made = ToolCall(call_id, name, args, signature=part.thoughtSignature)
                else:
                    written = msgspec.json.encode(args).decode()
                    made = ToolCall(
                        call_id, name, {}, invalid_args=written, signature=part.thoughtSignature
                    )
                self.calls.append(made)
                continue
            text = part.text
            if text:
                if part.thought:
                    self.thought = True
                    events.append(ThinkingEvent(text))
                else:
                    self.shown = True
                    events.append(TextEvent(text))
        if candidate.finishReason:
            self.finish = candidate.finishReason
            self.finish_message = candidate.finishMessage
            self.ratings = candidate.safetyRatings
        return events


def stream_chat(provider: GeminiProvider, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
    """The events of one reply: ends with one ``FinishEvent``, or an ``ErrorEvent``."""
    return _one_reply(provider, request, request.abort or AbortSignal(), None)


async def _one_reply(
    provider: GeminiProvider,
    request: ProviderRequest,
    abort: AbortSignal,
    correction: str | None,
) -> AsyncGenerator[ProviderEvent, None]:
    """One request's reply; a malformed call is asked again once, after this reply is
    closed (only that second reply passes through one more generator)."""
    model = request.model
    stream = provider.stream(
        "sse",
        model=model,
        abort=abort,
        affinity=request.conversation_id,
        headers=request.headers,
    )
    state = _Reply()
    again: str | None = None
    try:
        if correction is None and (notice := thinking_notice(request.think, model)):
            yield NoticeEvent(notice, "thinking")
        await provider._send(stream, request, correction)
        reads, frames = stream.reads, stream.frames
        while True:
            data = await reads()
            for sse in frames(data):
                text = sse.data
                if not text or text.isspace():
                    continue
                try:
                    chunk = _decode(text)
                except (msgspec.DecodeError, RecursionError) as exc:
                    yield stream.bad_frame(text, exc)
                    return
                if (chunk.error is not None or chunk.promptFeedback is not None) and (
                    refused := _refused(provider, model, chunk)
                ):
                    yield refused
                    return
                for candidate in chunk.candidates or ():
                    if candidate.index == 0:
                        for event in state.take(candidate):
                            yield event
                if chunk.usageMetadata is not None:
                    state.usage = chunk.usageMetadata
            if data is None:
                break
        events, again = _end(provider, request, stream, state, correction)
        for event in events:
            yield event
    except Exception as exc:
        yield stream.failure(exc)
    finally:
        await stream.aclose()
    if again is not None:
        async with aclosing(_one_reply(provider, request, abort, again)) as corrected:
            async for event in corrected:
                yield event


def _refused(provider: GeminiProvider, model: str, chunk: GenerateResponse) -> ErrorEvent | None:
    """The error for an error in the stream, or a blocked prompt; ``None`` for neither."""
    if chunk.error is not None:
        return _stream_error(provider, model, chunk.error)
    feedback = chunk.promptFeedback
    if feedback is not None and feedback.blockReason:
        return _blocked_prompt(model, feedback.blockReason, feedback)
    return None


def _stream_error(provider: GeminiProvider, model: str, value: Any) -> ErrorEvent:
    error = error_from_reply(api_error(value), config=provider.config, model=model)
    return ErrorEvent(
        f"The Gemini API failed in the middle of the reply from {model!r}: {error.message}",
        error.code,
    )


def _end(
    provider: GeminiProvider,
    request: ProviderRequest,
    stream: FrameStream,
    state: _Reply,
    correction: str | None,
) -> tuple[list[ProviderEvent], str | None]:
    """The reply's last events, and the correction to send when it must be asked again
    (``STREAM_INTERRUPTED`` when the body ended before a finish reason)."""
    if state.finish is None:
        return [stream.interrupted()], None
    stream.done()
    reason = state.finish or "STOP"
    model = request.model
    usage = usage_from(state.usage)
    if reason in _MALFORMED and not state.calls:
        said = f" ({state.finish_message.strip()})" if state.finish_message else ""
        if correction is None and not state.shown:
            notice = NoticeEvent(
                f"{model} wrote a function call that could not be parsed{said}; asking it "
                "once more.",
                "correction",
            )
            return [notice], CORRECTION.format(said=said)
        return [
            ErrorEvent(
                f"{model} wrote a function call that could not be parsed{said}"
                + (" again, after a correction" if correction is not None else "")
                + ". Try again, simplify the tools' parameters, or use another model.",
                ErrorCode.BAD_RESPONSE,
            )
        ], None
    events: list[ProviderEvent] = [ToolCallEvent(call) for call in state.calls]
    if reason == "STOP" and not state.shown and not state.calls and not state.thought:
        events.append(
            NoticeEvent(
                f"{model} sent an empty reply (no text and no function call). Try again, "
                "or rephrase the request.",
                "empty_reply",
            )
        )
    why = BLOCKED.get(reason)
    if why is not None:
        detail = f"{why}{_categories(state.ratings)}"
        if not state.shown and not state.calls:
            return [
                ErrorEvent(
                    f"Gemini blocked the reply from {model!r}: {detail} (finish reason "
                    f"{reason}). Rephrase the request; the safetySettings option (options="
                    '{"extra": {"safetySettings": [...]}}) sets how strict the filters are.',
                    ErrorCode.CONTENT_BLOCKED,
                )
            ], None
        events.append(
            NoticeEvent(
                f"Gemini stopped the reply part way: {detail} (finish reason {reason}).",
                "content_filter",
            )
        )
    provider._replied(request, usage)
    events.append(FinishEvent("length" if reason == "MAX_TOKENS" else "stop", usage))
    return events, None


def _blocked_prompt(model: str, reason: str, feedback: Any) -> ErrorEvent:
    message = getattr(feedback, "blockReasonMessage", None)
    why = f": {message}" if message else _categories(getattr(feedback, "safetyRatings", None))
    return ErrorEvent(
        f"Gemini blocked the prompt to {model!r} (block reason {reason}{why}). Rephrase "
        "it; the safetySettings option sets how strict the filters are.",
        ErrorCode.CONTENT_BLOCKED,
    )
