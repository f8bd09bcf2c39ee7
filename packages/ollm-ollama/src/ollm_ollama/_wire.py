"""The Ollama HTTP API as msgspec Structs: what ollm sends, and what it reads back.

Requests are strict (ollm builds them); every field of a reply is optional and unknown
fields are ignored, because real servers of many versions leave out zero values
(Go's ``omitempty``) and add fields over time. Reply structs declare only what ollm
reads, so msgspec skips the rest (``tensors``, ``created_at``...) without building it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from ollm import encode_json

__all__ = [
    "MAX_LINE_BYTES",
    "ChatChunk",
    "ChatRequest",
    "ChunkFunction",
    "ChunkMessage",
    "ChunkToolCall",
    "EmbedRequest",
    "EmbedResponse",
    "ErrorBody",
    "ModelDetails",
    "PsResponse",
    "PullLine",
    "RunningEntry",
    "ShowResponse",
    "TagModel",
    "TagsResponse",
    "VersionResponse",
    "WireFunction",
    "WireMessage",
    "WireTool",
    "WireToolCall",
    "WireToolFunction",
    "decoder",
    "encode",
]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A line longer than this is not Ollama talking (the stream is refused)."""

# -- requests (and history messages, both ways) ----------------------------------------


class WireFunction(msgspec.Struct):
    """A tool call's function in a history message: arguments always as an object."""

    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


class WireToolCall(msgspec.Struct, omit_defaults=True):
    """A tool call in an assistant message of the history (``id`` since v0.12.10)."""

    function: WireFunction
    id: str | None = None


class WireMessage(msgspec.Struct, omit_defaults=True):
    """One message of ``messages[]``. Images are bytes, so they encode as raw base64."""

    role: str
    content: str  # no default: always sent, even when empty
    images: list[bytes] | None = None
    thinking: str | None = None
    tool_calls: list[WireToolCall] | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None


class WireToolFunction(msgspec.Struct):
    """A tool offered to the model (every field sent, even when empty)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)


class WireTool(msgspec.Struct, kw_only=True):
    """``{"type": "function", "function": {...}}``."""

    type: str = "function"
    function: WireToolFunction


class ChatRequest(msgspec.Struct, omit_defaults=True):
    """``POST /api/chat``. ``stream`` and ``options`` have no default: always sent."""

    model: str
    messages: list[WireMessage]
    stream: bool
    options: dict[str, Any]
    tools: list[WireTool] | None = None
    format: str | dict[str, Any] | None = None
    keep_alive: float | int | str | None = None
    think: bool | str | None = None
    # Always false: a prompt longer than the window is refused, never cut silently.
    truncate: bool | None = None


class EmbedRequest(msgspec.Struct, omit_defaults=True):
    """``POST /api/embed``."""

    model: str
    input: list[str]
    truncate: bool | None = None
    dimensions: int | None = None
    keep_alive: float | int | str | None = None


# -- replies ---------------------------------------------------------------------------


class ChunkFunction(msgspec.Struct, gc=False):
    """A reply's tool call function: arguments as an object, or (defensively) a string."""

    name: str = ""
    arguments: dict[str, Any] | str | None = None


class ChunkToolCall(msgspec.Struct, gc=False):
    """A complete tool call in a reply chunk (never a delta)."""

    function: ChunkFunction | None = None
    id: str | None = None


class ChunkMessage(msgspec.Struct, gc=False):
    """The message of a reply chunk."""

    content: str | None = None
    thinking: str | None = None
    tool_calls: list[ChunkToolCall] | None = None


class ChatChunk(msgspec.Struct, gc=False):
    """One line of a ``/api/chat`` stream; a mid-stream failure is ``{"error": ...}``."""

    message: ChunkMessage | None = None
    done: bool | None = None
    done_reason: str | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_duration: int | None = None
    eval_duration: int | None = None
    error: Any = None


class ErrorBody(msgspec.Struct):
    """``{"error": "..."}``, the body of every error answer."""

    error: Any = None


class ModelDetails(msgspec.Struct):
    """``details`` of a model in ``/api/tags``, ``/api/show`` and ``/api/ps``."""

    parent_model: str | None = None
    format: str | None = None
    family: str | None = None
    families: list[str] | None = None
    parameter_size: str | None = None
    quantization_level: str | None = None
    context_length: int | None = None
    embedding_length: int | None = None


class TagModel(msgspec.Struct):
    """One entry of ``GET /api/tags``."""

    name: str = ""
    model: str | None = None
    modified_at: datetime | None = None
    size: int | None = None
    digest: str | None = None
    details: ModelDetails | None = None
    capabilities: list[str] | None = None
    remote_model: str | None = None
    remote_host: str | None = None


class TagsResponse(msgspec.Struct):
    """``GET /api/tags``."""

    models: list[TagModel] | None = None


class ShowResponse(msgspec.Struct):
    """``POST /api/show`` (without the tensors and the Modelfile, which ollm never reads)."""

    parameters: str | None = None
    template: str | None = None
    system: str | None = None
    details: ModelDetails | None = None
    model_info: dict[str, Any] | None = None
    capabilities: list[str] | None = None
    modified_at: datetime | None = None
    remote_model: str | None = None
    remote_host: str | None = None


class RunningEntry(msgspec.Struct):
    """One entry of ``GET /api/ps``."""

    name: str = ""
    model: str | None = None
    size: int | None = None
    size_vram: int | None = None
    expires_at: datetime | None = None
    context_length: int | None = None
    digest: str | None = None
    details: ModelDetails | None = None


class PsResponse(msgspec.Struct):
    """``GET /api/ps``."""

    models: list[RunningEntry] | None = None


class PullLine(msgspec.Struct, gc=False):
    """One line of ``POST /api/pull``; a failure is ``{"error": ...}``."""

    status: str | None = None
    digest: str | None = None
    total: int | None = None
    completed: int | None = None
    error: Any = None


class EmbedResponse(msgspec.Struct):
    """``POST /api/embed``."""

    model: str | None = None
    embeddings: list[list[float]] | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None


class VersionResponse(msgspec.Struct):
    """``GET /api/version``."""

    version: str | None = None


_encoder = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    """Encode a request struct to JSON bytes (lone surrogates as U+FFFD: ``ollm.encode_json``)."""
    return encode_json(value, _encoder.encode)


class _Decoder:
    """msgspec's decoder for one type, where JSON nested too deeply (which msgspec
    refuses with a ``RecursionError``) is a ``msgspec.DecodeError`` like any bad JSON."""

    __slots__ = ("_decode",)

    def __init__(self, kind: type[Any]) -> None:
        self._decode = msgspec.json.Decoder(kind).decode

    def decode(self, data: bytes | str) -> Any:
        try:
            return self._decode(data)
        except RecursionError:
            raise msgspec.DecodeError("JSON nested too deeply") from None


_decoders: dict[type[Any], _Decoder] = {}


def decoder(kind: type[Any]) -> _Decoder:
    """The one shared decoder for ``kind`` (built on first use)."""
    found = _decoders.get(kind)
    if found is None:
        found = _decoders[kind] = _Decoder(kind)
    return found
