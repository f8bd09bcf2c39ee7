"""``/api/chat`` as a stream of provider events: the hot path of every reply.

One async generator does it all, so a text chunk costs one read of the transport's
byte stream, one split, one msgspec decode into a typed struct, and one ``TextEvent``;
no task, queue or extra generator layer sits between the socket and the runtime.

Abort: the wait for the response headers (minutes, while a model loads) runs under the
signal's guard. For the body, a cancel scope per read would cost more than the rest of
the path, so the signal instead shuts the connection's socket down (one callback per
stream, safe from any thread): the pending read ends at once and the stream finishes
``cancelled``. A transport without a socket (an injected one) falls back to guarding
each read. Closing the iterator, or aborting, closes the response, so the server stops
generating.

Every line is read in full before the stream stops: the final ``done`` chunk may carry
text, thinking and tool calls. A malformed line ends the stream with ``BAD_RESPONSE``
quoting it, and a stream that ends before ``done`` with ``STREAM_INTERRUPTED``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import msgspec

from ollm.errors import BadResponseError, InvalidRequestError, OllmError, ProviderError
from ollm.kit import quote
from ollm.types import (
    ErrorEvent,
    FinishEvent,
    FinishReason,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
    Usage,
)
from ollm_ollama._convert import build_chat_request, tool_call_from_chunk
from ollm_ollama._errors import PROVIDER, describe_error_value, error_from_text
from ollm_ollama._guard import TruncationGuard
from ollm_ollama._wire import ChatChunk, encode

if TYPE_CHECKING:
    from ollm_ollama._provider import OllamaProvider

__all__ = ["stream_chat"]

log = logging.getLogger(__name__)

_decode_chunk = msgspec.json.Decoder(ChatChunk).decode


async def stream_chat(
    provider: OllamaProvider, request: ProviderRequest
) -> AsyncIterator[ProviderEvent]:
    """The events of one reply: ends with one ``FinishEvent``, or an ``ErrorEvent``."""
    model = request.model
    stream = provider.stream(
        "ndjson",
        model=model,
        abort=request.abort,
        affinity=request.conversation_id,
        headers=request.headers,
    )
    try:
        try:
            notice = await provider._loading_notice(model, stream.abort)
            stop = await provider._model_stop(model, stream.abort) if request.options.stop else ()
            guard = provider._truncation_guard(request)
            body = encode(
                build_chat_request(request, keep_alive=provider.config.keep_alive, model_stop=stop)
            )
        except (msgspec.EncodeError, TypeError, ValueError) as exc:
            raise _unsendable(model, exc) from None
        if notice is not None:
            yield notice
        # The head can take minutes to come while a model loads: that wait is guarded.
        await stream.open("POST", "/api/chat", json=msgspec.Raw(body))
        provider._streaming(model)
        reads, frames = stream.reads, stream.frames
        while True:
            data = await reads()
            for line in frames(data):
                try:
                    chunk = _decode_chunk(line)
                except (msgspec.DecodeError, RecursionError) as exc:
                    # msgspec refuses JSON nested about 1,000 deep with a RecursionError.
                    if not line or line.isspace():
                        continue
                    yield stream.bad_frame(line, exc)
                    return
                message = chunk.message
                if (
                    chunk.done
                    or chunk.error is not None
                    or (message is not None and (message.thinking or message.tool_calls))
                ):
                    # The rarer chunks: thinking, tool calls, the end, an error.
                    if chunk.done and guard.undecided(chunk.prompt_eval_count):
                        guard = await provider._learn_window(guard, stream.abort)
                    for event in _events(provider, request, chunk, guard):
                        if type(event) is FinishEvent:
                            stream.done()
                        yield event
                        if type(event) is FinishEvent or type(event) is ErrorEvent:
                            return
                elif message is not None and message.content:
                    yield TextEvent(message.content)
            if data is None:
                break
        yield stream.interrupted()
    except Exception as exc:
        yield stream.failure(exc)
    finally:
        await stream.aclose()


def _unsendable(model: str, exc: Exception) -> OllmError:
    return InvalidRequestError(
        f"The request to {model!r} cannot be sent as JSON ({exc}). Check the tool "
        "arguments, the options and their extra values.",
        provider=PROVIDER,
        model=model,
    )


def _events(
    provider: OllamaProvider, request: ProviderRequest, chunk: ChatChunk, guard: TruncationGuard
) -> list[ProviderEvent]:
    """The events of a chunk that is not plain text; a final event ends the list."""
    if chunk.error is not None:
        return [_stream_error(provider, request.model, chunk.error)]
    events: list[ProviderEvent] = []
    message = chunk.message
    if message is not None:
        if message.thinking:
            events.append(ThinkingEvent(message.thinking))
        if message.content:
            events.append(TextEvent(message.content))
        for call in message.tool_calls or ():
            try:
                events.append(ToolCallEvent(tool_call_from_chunk(call)))
            except BadResponseError as exc:
                events.append(ErrorEvent(exc.message, exc.code))
                return events
    if chunk.done:
        prompt = chunk.prompt_eval_count or 0
        completion = chunk.eval_count or 0
        usage = Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            total_duration_ns=chunk.total_duration,
            load_duration_ns=chunk.load_duration,
            prompt_eval_duration_ns=chunk.prompt_eval_duration,
            eval_duration_ns=chunk.eval_duration,
        )
        evaluated = chunk.prompt_eval_count
        if guard.cut(evaluated):
            assert evaluated is not None
            events.append(guard.notice(evaluated))
            evaluated = None  # a count of a cut prompt would under-estimate the next one
        provider._replied(request, evaluated)
        # "stop" also when the model called tools; "load"/"unload" only for empty chats.
        reason: FinishReason = "length" if chunk.done_reason == "length" else "stop"
        events.append(FinishEvent(reason, usage))
    return events


def _stream_error(provider: OllamaProvider, model: str, value: object) -> ErrorEvent:
    text = describe_error_value(value) or "an unknown error"
    error = error_from_text(text, model=model) or ProviderError(
        f"Ollama failed in the middle of the reply from {model!r}: {quote(text)}. Try again; if it "
        "keeps happening, check the server's log (the output of ollama serve).",
        provider=PROVIDER,
        model=model,
    )
    return ErrorEvent(error.message, error.code)
