"""The Messages API's replies, as far as ollm reads them (see WIRE.md).

Only the fields ollm reads are declared; msgspec skips the rest without building them.
One ``Event`` struct holds every kind of streamed event (its ``type`` says which): the
API may add event kinds, which a tagged union would refuse and one struct lets ollm skip.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "Block",
    "CountTokens",
    "Delta",
    "ErrorBody",
    "Event",
    "ModelCard",
    "ModelList",
    "WireUsage",
]


class WireUsage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class Block(msgspec.Struct):
    """A content block as ``content_block_start`` opens it (or a whole reply has it)."""

    type: str = ""
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None


class Delta(msgspec.Struct):
    """A ``content_block_delta``'s delta, or a ``message_delta``'s (its stop reason)."""

    type: str | None = None
    text: str | None = None
    partial_json: str | None = None
    thinking: str | None = None
    signature: str | None = None
    stop_reason: str | None = None
    stop_sequence: str | None = None


class MessageInfo(msgspec.Struct):
    id: str | None = None
    model: str | None = None
    usage: WireUsage | None = None
    content: list[Block] | None = None
    stop_reason: str | None = None


class Event(msgspec.Struct):
    """One streamed event: ``message_start``, ``content_block_start``/``_delta``/``_stop``,
    ``message_delta``, ``message_stop``, ``ping`` or ``error``."""

    type: str = ""
    index: int = 0
    message: MessageInfo | None = None
    content_block: Block | None = None
    delta: Delta | None = None
    usage: WireUsage | None = None
    error: Any = None


class ModelCard(msgspec.Struct):
    id: str = ""
    display_name: str | None = None
    created_at: str | None = None
    type: str | None = None


class ModelList(msgspec.Struct):
    data: list[ModelCard] = msgspec.field(default_factory=list)
    has_more: bool = False
    last_id: str | None = None


class CountTokens(msgspec.Struct):
    input_tokens: int | None = None


class ErrorBody(msgspec.Struct):
    """``{"type": "error", "error": {"type", "message"}, "request_id"}``."""

    error: Any = None
    request_id: str | None = None
