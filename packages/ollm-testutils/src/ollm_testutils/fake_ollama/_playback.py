"""Playing a scripted chat reply on the wire: NDJSON chunks, the final chunk, the faults."""

from __future__ import annotations

import random
import string
from typing import Any

from ollm_testutils.fake_ollama._exchange import JSON, NDJSON, Exchange
from ollm_testutils.fake_ollama._script import AUTO, OllamaReply
from ollm_testutils.fake_ollama._wire import (
    ChatChunk,
    ChatRequest,
    ErrorBody,
    WireFunction,
    WireMessage,
    WireToolCall,
    go_json,
    utc_timestamp,
)

__all__ = ["DEFAULT_TEXT", "DEFAULT_THINKING", "default_reply", "play", "prompt_tokens"]

DEFAULT_TEXT = ["Hello", "!", " How", " can", " I", " help", " you", " today", "?"]
DEFAULT_THINKING = ["Okay", ",", " the", " user", " said", " hello", "."]
_BULK_WRITE = 1 << 18
_ID_ALPHABET = string.ascii_lowercase + string.digits


def default_reply(think: bool | str) -> OllamaReply:
    """What a model says when no test scripted anything: a short greeting."""
    return OllamaReply(DEFAULT_TEXT, thinking=DEFAULT_THINKING if think else ())


def prompt_tokens(chat: ChatRequest) -> int:
    """The prompt tokens the fake counts for ``chat``: characters / 4 of the messages'
    content, and 10 a message."""
    characters = sum(len(message.content or "") for message in chat.messages or ())
    return max(1, -(-characters // 4)) + 10 * len(chat.messages or ())


def play(
    reply: OllamaReply,
    model: str,
    chat: ChatRequest,
    exchange: Exchange,
    evaluated: int | None = None,
) -> None:
    """Answer ``chat`` with ``reply``, streamed or whole as the request asked;
    ``evaluated`` is the ``prompt_eval_count`` to report (else the prompt's count)."""
    if reply.first_byte_delay and not exchange.wait(reply.first_byte_delay):
        return
    if reply.status != 200:
        body = reply.body or b""
        exchange.response.send(reply.status, body, JSON if body else None)
    elif chat.stream is False:
        _play_whole(reply, model, chat, exchange, evaluated)
    elif reply.bulk:
        _play_bulk(reply, model, chat, exchange, evaluated)
    else:
        _play_stream(reply, model, chat, exchange, evaluated)


def _call_id() -> str:
    return "call_" + "".join(random.choices(_ID_ALPHABET, k=8))


def _wire_calls(reply: OllamaReply) -> list[WireToolCall]:
    calls = []
    for position, call in enumerate(reply.tool_calls):
        index = position if call.index is AUTO else call.index
        call_id = _call_id() if call.id is AUTO else call.id
        calls.append(
            WireToolCall(
                id=call_id if isinstance(call_id, str) else None,
                function=WireFunction(
                    index=index if isinstance(index, int) else None,
                    name=call.name,
                    arguments=call.arguments,
                ),
            )
        )
    return calls


def _metrics(
    reply: OllamaReply, chat: ChatRequest, chunks: int, evaluated: int | None
) -> dict[str, int]:
    if reply.metrics is not None:
        return {key: value for key, value in reply.metrics.items() if value}
    prompt = evaluated if evaluated is not None else prompt_tokens(chat)
    completion = max(1, chunks)
    load, prompt_ns, eval_ns = 1_334_875, prompt * 1_317_000, completion * 16_083_000
    return {
        "total_duration": load + prompt_ns + eval_ns + 2_148_291,
        "load_duration": load,
        "prompt_eval_count": prompt,
        "prompt_eval_duration": prompt_ns,
        "eval_count": completion,
        "eval_duration": eval_ns,
    }


def _chunk(model: str, content: str = "", **fields: Any) -> bytes:
    message = WireMessage(
        role="assistant",
        content=content,
        thinking=fields.pop("thinking", None),
        tool_calls=fields.pop("tool_calls", None),
    )
    chunk = ChatChunk(model=model, created_at=utc_timestamp(), message=message, done=False)
    return go_json(chunk) + b"\n"


def _final(
    reply: OllamaReply,
    model: str,
    chat: ChatRequest,
    chunks: int,
    content: str,
    thinking: str | None = None,
    tool_calls: list[WireToolCall] | None = None,
    evaluated: int | None = None,
) -> bytes:
    chunk = ChatChunk(
        model=model,
        created_at=utc_timestamp(),
        message=WireMessage(
            role="assistant", content=content, thinking=thinking, tool_calls=tool_calls or None
        ),
        done_reason=reply.done_reason or None,
        done=True,
        **_metrics(reply, chat, chunks, evaluated),
    )
    return go_json(chunk)


def _stream_lines(reply: OllamaReply, model: str) -> tuple[list[bytes], list[WireToolCall]]:
    """The ``done:false`` lines of a reply, and the calls left for the final chunk."""
    lines: list[bytes] = []
    if reply.huge_chunk:
        lines.append(_chunk(model, "x" * reply.huge_chunk))
    lines.extend(_chunk(model, "", thinking=piece) for piece in reply.thinking)
    lines.extend(_chunk(model, piece) for piece in reply.text)
    calls = _wire_calls(reply)
    final_calls: list[WireToolCall] = []
    if calls:
        if reply.tool_calls_on == "chunk":
            lines.append(_chunk(model, "", tool_calls=calls))
        elif reply.tool_calls_on == "each":
            lines.extend(_chunk(model, "", tool_calls=[call]) for call in calls)
        else:
            final_calls = calls
    if reply.malformed is not None:
        malformed = reply.malformed if reply.malformed.endswith(b"\n") else reply.malformed + b"\n"
        lines.insert(max(0, min(reply.malformed_at, len(lines))), malformed)
    return lines, final_calls


def _play_stream(
    reply: OllamaReply, model: str, chat: ChatRequest, exchange: Exchange, evaluated: int | None
) -> None:
    response, connection = exchange.response, exchange.connection
    if reply.lines is not None:
        pieces = list(reply.lines)
    else:
        pieces, final_calls = _stream_lines(reply, model)
        if reply.hang:
            pass
        elif reply.error_line is not None:
            pieces.append(go_json(ErrorBody(reply.error_line)) + b"\n")
        elif reply.end == "done":
            final = _final(
                reply, model, chat, len(pieces), reply.final_text, None, final_calls, evaluated
            )
            pieces.append(final + b"\n")
    if reply.write_size:
        body = b"".join(pieces)
        size = reply.write_size
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
    if not response.start_chunked(200, NDJSON):
        return
    for number, piece in enumerate(pieces):
        if number and reply.chunk_delay and not connection.wait(reply.chunk_delay):
            response.abort()
            return
        if not response.write(piece):
            return
    if reply.hang:
        connection.wait(None)
        response.abort()
    elif reply.end == "close" and (reply.error_line is None or reply.lines is not None):
        response.abort()
    else:
        response.end()


def _play_bulk(
    reply: OllamaReply, model: str, chat: ChatRequest, exchange: Exchange, evaluated: int | None
) -> None:
    body = reply._bulk_cache.get(model)
    if body is None:
        stamp = utc_timestamp()
        encoded = [
            go_json(
                ChatChunk(
                    model=model,
                    created_at=stamp,
                    message=WireMessage(role="assistant", content=piece),
                    done=False,
                )
            )
            + b"\n"
            for piece in reply.text
        ]
        encoded.append(
            _final(reply, model, chat, len(encoded), reply.final_text, evaluated=evaluated) + b"\n"
        )
        # Framed as a real server frames it, one HTTP chunk per line, so a client does
        # all the work it would do against Ollama; but built once, and sent in large
        # writes, so that the server is never what a benchmark measures.
        body = reply._bulk_cache[model] = b"".join(
            b"%x\r\n%b\r\n" % (len(line), line) for line in encoded
        )
    response = exchange.response
    if not response.start_chunked(200, NDJSON):
        return
    view = memoryview(body)
    for start in range(0, len(body), _BULK_WRITE):
        if not response.write_framed(bytes(view[start : start + _BULK_WRITE])):
            return
    response.end()


def _play_whole(
    reply: OllamaReply, model: str, chat: ChatRequest, exchange: Exchange, evaluated: int | None
) -> None:
    """``stream: false``: one object joining everything, as ``writeChatResponse`` does."""
    response = exchange.response
    if reply.hang:
        exchange.wait(None)
        response.abort()
    elif reply.end == "close":
        response.abort()
    elif reply.error_line is not None or reply.end == "eof":
        exchange.error(500, reply.error_line or "an error was encountered while running the model")
    elif reply.lines is not None:
        response.send(200, b"".join(reply.lines).rstrip(b"\n"), JSON)
    elif reply.malformed is not None:
        response.send(200, reply.malformed, JSON)
    else:
        content = ("x" * reply.huge_chunk) + "".join(reply.text) + reply.final_text
        thinking = "".join(reply.thinking) or None
        chunks = len(reply.text) + len(reply.thinking) + (1 if reply.tool_calls else 0)
        body = _final(reply, model, chat, chunks, content, thinking, _wire_calls(reply), evaluated)
        response.send(200, body, JSON)
