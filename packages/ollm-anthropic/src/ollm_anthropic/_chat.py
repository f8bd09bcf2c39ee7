"""``POST /v1/messages`` with ``stream: true`` as a stream of provider events.

The reply is Server-Sent Events (WIRE.md, "Streaming"): ``message_start`` (the prompt's
usage), then for each content block ``content_block_start``, its deltas and
``content_block_stop``, then ``message_delta`` (the stop reason and the output's usage)
and ``message_stop``; ``ping`` anywhere. ``text_delta`` is ``TextEvent``,
``thinking_delta`` ``ThinkingEvent``; ``input_json_delta`` pieces make a ``tool_use``
block's input (``ToolCallDeltaEvent`` each when asked), and the calls are given out,
whole, when the reply ends. A reply's ``thinking`` blocks (their ``signature_delta``
kept as sent) and ``redacted_thinking`` blocks ride on its first call's signature, to go
back unchanged (``_convert``).

An ``error`` event is ``STREAM_INTERRUPTED`` quoting the API, and a body that ends before
``message_stop`` too: the runtime keeps the partial reply. Stop reasons: ``end_turn``,
``stop_sequence``, ``tool_use`` and ``pause_turn`` are ``stop``, ``max_tokens`` (and
``model_context_window_exceeded``) ``length``; ``refusal`` is ``CONTENT_BLOCKED``, or a
notice when part of the reply was already shown.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

import msgspec

from ollm.errors import ErrorCode
from ollm.kit import new_call_id, output_tool_text
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
    ToolCallDeltaEvent,
    ToolCallEvent,
    Usage,
)
from ollm_anthropic._convert import OUTPUT_TOOL, encode_thinking, output_schema
from ollm_anthropic._errors import api_error
from ollm_anthropic._wire import Event, WireUsage

if TYPE_CHECKING:
    from ollm_anthropic._provider import AnthropicProvider

__all__ = ["stream_chat", "usage_from"]

_decode = msgspec.json.Decoder(Event).decode
_decode_args = msgspec.json.decode
_LENGTH = frozenset({"max_tokens", "model_context_window_exceeded"})


def usage_from(start: WireUsage | None, end: WireUsage | None) -> Usage | None:
    """ollm's usage from ``message_start``'s and ``message_delta``'s (the later wins).

    The API counts the prompt in three parts: ``input_tokens`` (after the last cache
    breakpoint), ``cache_creation_input_tokens`` (written to the cache) and
    ``cache_read_input_tokens`` (read from it); ollm's prompt is their sum.
    """
    if start is None and end is None:
        return None

    def pick(name: str) -> int | None:
        later = getattr(end, name, None) if end is not None else None
        return later if later is not None else getattr(start, name, None)

    written = pick("cache_creation_input_tokens")
    read = pick("cache_read_input_tokens")
    prompt = (pick("input_tokens") or 0) + (written or 0) + (read or 0)
    completion = pick("output_tokens") or 0
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cached_tokens=read,
        cache_creation_tokens=written,
    )


class _Block:
    """One content block being streamed."""

    __slots__ = ("data", "id", "json", "kind", "name", "signature", "text")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.id = ""
        self.name = ""
        self.json: list[str] = []
        self.text: list[str] = []
        self.signature: list[str] = []
        self.data: str | None = None


class _Reply:
    """What one reply gathered."""

    __slots__ = ("blocks", "calls", "output", "shown", "start", "stop", "thinking", "usage")

    def __init__(self, request: ProviderRequest) -> None:
        self.blocks: dict[int, _Block] = {}
        self.calls: list[ToolCall] = []
        self.thinking: list[dict[str, Any]] = []
        self.start: WireUsage | None = None
        self.usage: WireUsage | None = None
        self.stop: str | None = None
        self.shown = False
        # Typed output whose schema is the tool's own streams as text, piece by piece (a
        # wrapped one, {"value": ...}, is given whole at the end).
        schema = output_schema(request.response_format)
        self.output = schema is not None and not schema[1]


def stream_chat(
    provider: AnthropicProvider, request: ProviderRequest
) -> AsyncGenerator[ProviderEvent, None]:
    """The events of one reply: ends with one ``FinishEvent``, or an ``ErrorEvent``."""
    return _reply(provider, request, request.abort or AbortSignal())


async def _reply(
    provider: AnthropicProvider, request: ProviderRequest, abort: AbortSignal
) -> AsyncGenerator[ProviderEvent, None]:
    model = request.model
    stream = provider.stream(
        "sse", model=model, abort=abort, affinity=request.conversation_id, headers=request.headers
    )
    state = _Reply(request)
    deltas = request.tool_call_deltas
    try:
        for notice in provider.notices(request):
            yield notice
        await stream.open("POST", "/v1/messages", build=lambda: provider.body(request))
        reads, frames = stream.reads, stream.frames
        while True:
            data = await reads()
            for sse in frames(data):
                text = sse.data
                if not text or text.isspace():
                    continue
                try:
                    event = _decode(text)
                except (msgspec.DecodeError, RecursionError) as exc:
                    yield stream.bad_frame(text, exc)
                    return
                kind = event.type
                if kind == "content_block_delta":
                    delta = event.delta
                    if delta is None:
                        continue
                    what = delta.type
                    if what == "text_delta":
                        if delta.text:
                            state.shown = True
                            yield TextEvent(delta.text)
                        continue
                    block = state.blocks.get(event.index)
                    if block is None:
                        continue
                    if what == "input_json_delta":
                        piece = delta.partial_json or ""
                        if block.kind == "output":
                            if piece:
                                yield TextEvent(piece)
                            continue
                        block.json.append(piece)
                        if deltas and piece and block.name != OUTPUT_TOOL:
                            yield ToolCallDeltaEvent(event.index, arguments_delta=piece)
                    elif what == "thinking_delta":
                        if delta.thinking:
                            block.text.append(delta.thinking)
                            yield ThinkingEvent(delta.thinking)
                    elif what == "signature_delta":
                        block.signature.append(delta.signature or "")
                elif kind == "content_block_start":
                    for made in _open(state, event, deltas):
                        yield made
                elif kind == "content_block_stop":
                    _close(state, event.index)
                elif kind == "message_start":
                    if event.message is not None:
                        state.start = event.message.usage
                elif kind == "message_delta":
                    if event.delta is not None and event.delta.stop_reason:
                        state.stop = event.delta.stop_reason
                    if event.usage is not None:
                        state.usage = event.usage
                elif kind == "message_stop":
                    stream.done()
                    for made in _end(provider, request, state):
                        yield made
                    return
                elif kind == "error":
                    yield _broken(provider, model, event.error)
                    return
                # ping, and kinds the API may add, are skipped.
            if data is None:
                break
        yield stream.interrupted()
    except Exception as exc:
        yield stream.failure(exc)
    finally:
        await stream.aclose()


def _open(state: _Reply, event: Event, deltas: bool) -> list[ProviderEvent]:
    start = event.content_block
    if start is None:
        return []
    block = _Block(start.type)
    state.blocks[event.index] = block
    if start.type == "text":
        if start.text:
            state.shown = True
            return [TextEvent(start.text)]
    elif start.type == "tool_use" and state.output and start.name == OUTPUT_TOOL:
        block.kind = "output"
        state.shown = True
        if isinstance(start.input, dict) and start.input:
            return [TextEvent(msgspec.json.encode(start.input).decode())]
    elif start.type == "tool_use":
        block.id = start.id or new_call_id()
        block.name = start.name or ""
        # The input streams as JSON text; a server that sends it whole sends it here.
        if isinstance(start.input, dict) and start.input:
            block.json.append(msgspec.json.encode(start.input).decode())
        if deltas and block.name != OUTPUT_TOOL:
            return [ToolCallDeltaEvent(event.index, id=block.id, name=block.name)]
    elif start.type == "thinking":
        if start.thinking:
            block.text.append(start.thinking)
        if start.signature:
            block.signature.append(start.signature)
        if start.thinking:
            return [ThinkingEvent(start.thinking)]
    elif start.type == "redacted_thinking":
        block.data = start.data or ""
    return []


def _close(state: _Reply, index: int) -> None:
    block = state.blocks.get(index)
    if block is None:
        return
    if block.kind == "tool_use":
        written = "".join(block.json)
        try:
            args = _decode_args(written) if written.strip() else {}
        except (msgspec.DecodeError, RecursionError):
            args = None
        if isinstance(args, dict):
            state.calls.append(ToolCall(block.id, block.name, args))
        else:
            state.calls.append(ToolCall(block.id, block.name, {}, invalid_args=written))
    elif block.kind == "thinking":
        state.thinking.append(
            {
                "type": "thinking",
                "thinking": "".join(block.text),
                "signature": "".join(block.signature),
            }
        )
    elif block.kind == "redacted_thinking":
        state.thinking.append({"type": "redacted_thinking", "data": block.data or ""})


def _end(
    provider: AnthropicProvider, request: ProviderRequest, state: _Reply
) -> list[ProviderEvent]:
    model = request.model
    events: list[ProviderEvent] = []
    calls = state.calls
    output = [c for c in calls if c.name == OUTPUT_TOOL]
    if output and output_schema(request.response_format) is not None:
        calls = [c for c in calls if c.name != OUTPUT_TOOL]
        events.append(TextEvent(_output_text(request, output[0])))
        state.shown = True
    if calls and state.thinking:
        calls[0] = msgspec.structs.replace(calls[0], signature=encode_thinking(state.thinking))
    events.extend(ToolCallEvent(call) for call in calls)
    reason = state.stop
    if reason == "refusal":
        if not state.shown and not calls:
            return [
                ErrorEvent(
                    f"{model} declined to answer (stop reason refusal). Rephrase the request, "
                    "or start a new conversation.",
                    ErrorCode.CONTENT_BLOCKED,
                )
            ]
        events.append(
            NoticeEvent(f"{model} stopped the reply part way (stop reason refusal).", "refusal")
        )
    elif reason == "pause_turn":
        events.append(
            NoticeEvent(
                f"{model} paused a long turn (stop reason pause_turn); send the conversation "
                "again to let it continue.",
                "pause_turn",
            )
        )
    elif reason == "model_context_window_exceeded":
        events.append(
            NoticeEvent(
                f"The reply stopped at the end of {model}'s context window.", "context_window"
            )
        )
    usage = usage_from(state.start, state.usage)
    provider.replied(request, usage)
    events.append(FinishEvent("length" if reason in _LENGTH else "stop", usage))
    return events


def _output_text(request: ProviderRequest, call: ToolCall) -> str:
    """The typed output's JSON, from the output tool's input (unwrapped when wrapped)."""
    schema = output_schema(request.response_format)
    return output_tool_text(call, schema is not None and schema[1])


def _broken(provider: AnthropicProvider, model: str, value: Any) -> ErrorEvent:
    said = api_error(value)
    kind = f"{said.type}: " if said.type else ""
    return ErrorEvent(
        f"{provider.context.provider[:1].upper()}{provider.context.provider[1:]} failed in "
        f"the middle of the reply from {model!r} ({kind}{said.message}). The partial reply "
        "is kept; try again.",
        ErrorCode.STREAM_INTERRUPTED,
    )
