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
from ollm_gemini._errors import api_error, error_from_reply
from ollm_gemini._wire import Candidate, GenerateResponse, SafetyRating, UsageMetadata
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

if TYPE_CHECKING:
    from ollm_gemini._provider import GeminiProvider

__all__ = ["BLOCKED", "stream_chat", "usage_from"]

log = logging.getLogger(__name__)

_decode = msgspec.json.Decoder(GenerateResponse).decode
MAX_EVENT_BYTES = 16 * 1024 * 1024

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

    __slots__ = ("calls", "finish", "finish_message", "ratings", "shown", "usage")

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []
        self.finish: str | None = None
        self.finish_message: str | None = None
        self.ratings: list[SafetyRating] | None = None
        self.usage: UsageMetadata | None = None
        self.shown = False

    def take(self, candidate: Candidate, first_id: int) -> list[ProviderEvent]:
        """The events of one candidate's parts; calls are kept for the end."""
        events: list[ProviderEvent] = []
        content = candidate.content
        for part in (content.parts if content is not None else None) or ():
            call = part.functionCall
            if call is not None:
                args = call.args
                number = first_id + len(self.calls)
                call_id = call.id or f"call_{number}"
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
                    events.append(ThinkingEvent(text))
                else:
                    self.shown = True
                    events.append(TextEvent(text))
        if candidate.finishReason:
            self.finish = candidate.finishReason
            self.finish_message = candidate.finishMessage
            self.ratings = candidate.safetyRatings
        return events


def _calls_before(request: ProviderRequest) -> int:
    return sum(len(message.tool_calls) for message in request.messages)


def stream_chat(provider: GeminiProvider, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
    """The events of one reply: ends with one ``FinishEvent``, or an ``ErrorEvent``."""
    abort = request.abort if request.abort is not None else AbortSignal()
    return _one_reply(provider, request, abort, None)


async def _one_reply(
    provider: GeminiProvider,
    request: ProviderRequest,
    abort: AbortSignal,
    correction: str | None,
) -> AsyncGenerator[ProviderEvent, None]:
    """One request's reply; a malformed call is asked again once, after this reply is
    closed (only that second reply passes through one more generator)."""
    if abort.aborted:
        yield FinishEvent("cancelled")
        return
    http = provider._http
    model = request.model
    reply: Reply | None = None
    reads: BodyRead | None = None
    unwatch = None
    finished = False
    state = _Reply()
    first_id = _calls_before(request)
    again: str | None = None
    try:
        with abort.guard() as scope:
            reply = await provider._open_chat(request, correction=correction)
        if scope.cancelled_caught or reply is None:
            yield FinishEvent("cancelled")
            return
        response = reply.response
        reads = body_reader(response)
        unwatch = abort_shuts_socket(response, abort)
        splitter = EventSplitter(MAX_EVENT_BYTES)
        ended = False
        while not ended:
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
                if not text or text.isspace():
                    continue
                try:
                    chunk = _decode(text)
                except (msgspec.DecodeError, RecursionError) as exc:
                    yield _bad_event(provider, model, text, exc)
                    return
                if chunk.error is not None:
                    said = api_error(chunk.error)
                    error = error_from_reply(said, config=provider.config, model=model)
                    yield ErrorEvent(
                        f"The Gemini API failed in the middle of the reply from {model!r}: "
                        f"{error.message}",
                        error.code,
                    )
                    return
                feedback = chunk.promptFeedback
                if feedback is not None and feedback.blockReason:
                    yield _blocked_prompt(model, feedback.blockReason, feedback)
                    return
                for candidate in chunk.candidates or ():
                    if candidate.index != 0:
                        continue
                    for event in state.take(candidate, first_id):
                        yield event
                if chunk.usageMetadata is not None:
                    state.usage = chunk.usageMetadata
        if state.finish is None:
            yield ErrorEvent(
                f"The reply from {model!r} ended before the Gemini API said it was done (the "
                f"connection to {http.url} closed early). Try again.",
                ErrorCode.STREAM_INTERRUPTED,
            )
            return
        finished = True
        events, again = _end(provider, request, state, correction)
        for event in events:
            yield event
    except Exception as exc:
        yield failure_event(
            exc,
            abort,
            connection_error=lambda e: http.error(e, model=model, streaming=reply is not None),
            reading=f"Reading the reply from {http.url}",
            report="the model's name",
            logger=log,
        )
    finally:
        if unwatch is not None:
            unwatch()
        if reply is not None:
            if finished and reads is not None and not abort.aborted:
                await drain(reads)
            await reply.aclose()
    if again is not None:
        async with aclosing(_one_reply(provider, request, abort, again)) as corrected:
            async for event in corrected:
                yield event


def _end(
    provider: GeminiProvider,
    request: ProviderRequest,
    state: _Reply,
    correction: str | None,
) -> tuple[list[ProviderEvent], str | None]:
    """The reply's last events, and the correction to send when it must be asked again."""
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


def _fired(abort: AbortSignal) -> bool:
    # A call, so that the type checker does not assume the signal cannot change.
    return abort.aborted


def _bad_event(provider: GeminiProvider, model: str, text: str, exc: Exception) -> ErrorEvent:
    reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
    return ErrorEvent(
        f"{provider.config.base_url} sent an event that is not a Gemini response ({reason}) "
        f"in the reply from {model!r}: {excerpt(text.encode())}. Check "
        f"{provider.config.where}.",
        ErrorCode.BAD_RESPONSE,
    )
