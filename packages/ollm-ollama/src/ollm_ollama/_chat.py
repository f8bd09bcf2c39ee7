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
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import httpx
import msgspec

from ollm.errors import (
    BadResponseError,
    ErrorCode,
    OllmError,
    ProviderError,
)
from ollm.types import (
    AbortSignal,
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
from ollm_http import (
    LineSplitter,
    abort_shuts_socket,
    body_reader,
    close_response,
    drain,
    failure_event,
)
from ollm_ollama._convert import build_chat_request, tool_call_from_chunk
from ollm_ollama._errors import PROVIDER, describe_error_value, error_from_text, excerpt
from ollm_ollama._wire import MAX_LINE_BYTES, ChatChunk, encode

if TYPE_CHECKING:
    from ollm_ollama._provider import OllamaProvider

__all__ = ["stream_chat"]

log = logging.getLogger(__name__)

_decode_chunk = msgspec.json.Decoder(ChatChunk).decode


async def stream_chat(
    provider: OllamaProvider, request: ProviderRequest
) -> AsyncIterator[ProviderEvent]:
    """The events of one reply: ends with one ``FinishEvent``, or an ``ErrorEvent``."""
    abort = request.abort if request.abort is not None else AbortSignal()
    if abort.aborted:
        yield FinishEvent("cancelled")
        return
    http = provider._http
    model = request.model
    try:
        notice = await provider._loading_notice(model, abort)
        stop = await provider._model_stop(model, abort) if request.options.stop else ()
        body = encode(
            build_chat_request(request, keep_alive=provider.config.keep_alive, model_stop=stop)
        )
    except OllmError as exc:
        yield ErrorEvent(exc.message, exc.code)
        return
    except (msgspec.EncodeError, TypeError, ValueError) as exc:
        yield ErrorEvent(
            f"The request to {model!r} cannot be sent as JSON ({exc}). Check the tool "
            "arguments, the options and their extra values.",
            ErrorCode.INVALID_REQUEST,
        )
        return
    if notice is not None:
        yield notice

    response: httpx.Response | None = None
    unwatch: Callable[[], None] | None = None
    reads: Callable[[], Awaitable[bytes]] | None = None
    finished = False
    try:
        # The headers can take minutes to come while a model loads: that wait is guarded.
        with abort.guard() as scope:
            response = await http.send("POST", "/api/chat", body=body, model=model, stream=True)
        if scope.cancelled_caught or response is None:
            yield FinishEvent("cancelled")
            return
        provider._streaming(model)
        reads = body_reader(response)
        unwatch = abort_shuts_socket(response, abort)
        splitter = LineSplitter(MAX_LINE_BYTES)
        while True:
            ended = False
            try:
                if unwatch is None:
                    # No socket to shut (an injected transport): guard each read.
                    with abort.guard() as scope:
                        data = await reads()
                    if scope.cancelled_caught:
                        yield FinishEvent("cancelled")
                        return
                else:
                    data = await reads()
            except StopAsyncIteration:
                ended = True
            if _fired(abort):  # by this task, between reads, or while data was buffered
                yield FinishEvent("cancelled")
                return
            for line in [splitter.end() or b""] if ended else splitter.feed(data):
                if not line:
                    continue
                try:
                    chunk = _decode_chunk(line)
                except (msgspec.DecodeError, RecursionError) as exc:
                    # msgspec refuses JSON nested about 1,000 deep with a RecursionError.
                    if line.isspace():
                        continue
                    yield _bad_line(provider, model, line, exc)
                    return
                message = chunk.message
                if (
                    chunk.done
                    or chunk.error is not None
                    or (message is not None and (message.thinking or message.tool_calls))
                ):
                    # The rarer chunks: thinking, tool calls, the end, an error.
                    for event in _events(provider, request, chunk):
                        if type(event) is FinishEvent:
                            finished = True
                        yield event
                        if type(event) is FinishEvent or type(event) is ErrorEvent:
                            return
                elif message is not None and message.content:
                    yield TextEvent(message.content)
            if ended:
                break
        yield ErrorEvent(
            f"The reply from {model!r} ended before Ollama said it was done (the "
            f"connection to {http.url} closed early). Try again; if it keeps happening, "
            "check the server's log.",
            ErrorCode.STREAM_INTERRUPTED,
        )
    except Exception as exc:
        yield failure_event(
            exc,
            abort,
            connection_error=lambda e: http.error(e, model=model, streaming=response is not None),
            reading=f"Reading the reply from Ollama at {http.url}",
            report="the model and server version",
            logger=log,
        )
    finally:
        if unwatch is not None:
            unwatch()
        if response is not None:
            if finished and reads is not None and not abort.aborted:
                await drain(reads)
            await close_response(response)


def _fired(abort: AbortSignal) -> bool:
    # A call, so that the type checker does not assume the signal cannot change.
    return abort.aborted


def _events(
    provider: OllamaProvider, request: ProviderRequest, chunk: ChatChunk
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
        provider._replied(request, chunk.prompt_eval_count)
        # "stop" also when the model called tools; "load"/"unload" only for empty chats.
        reason: FinishReason = "length" if chunk.done_reason == "length" else "stop"
        events.append(FinishEvent(reason, usage))
    return events


def _stream_error(provider: OllamaProvider, model: str, value: object) -> ErrorEvent:
    text = describe_error_value(value) or "an unknown error"
    error = error_from_text(text, model=model) or ProviderError(
        f"Ollama failed in the middle of the reply from {model!r}: {text}. Try again; if it "
        "keeps happening, check the server's log (the output of ollama serve).",
        provider=PROVIDER,
        model=model,
    )
    return ErrorEvent(error.message, error.code)


def _bad_line(provider: OllamaProvider, model: str, line: bytes, exc: Exception) -> ErrorEvent:
    reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
    return ErrorEvent(
        f"Ollama at {provider.config.host} sent a line that is not a chat chunk ({reason}) "
        f"in the reply from {model!r}: {excerpt(line)}. Check that the address is an "
        "Ollama server, not a proxy's page.",
        ErrorCode.BAD_RESPONSE,
    )
