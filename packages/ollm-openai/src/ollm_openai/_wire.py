"""The Chat Completions wire format, as the servers really send it (see WIRE.md).

Only the fields ollm reads are declared; msgspec skips the rest without building them.
Every field a server may leave out or send as ``null`` has a default, because they do:
llama.cpp sends no ``index`` on whole tool calls, LM Studio no ``id``, vLLM a usage chunk
with an empty ``choices``.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "Chunk",
    "Completion",
    "EmbeddingList",
    "ErrorBody",
    "ModelCard",
    "ModelList",
]


class FunctionDelta(msgspec.Struct):
    name: str | None = None
    # A JSON string by the spec; a few servers send the object itself.
    arguments: Any = None


class ToolCallDelta(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: FunctionDelta | None = None


class Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCallDelta] | None = None
    refusal: str | None = None


class Choice(msgspec.Struct):
    index: int = 0
    delta: Delta | None = None
    # A whole reply (stream=false) has `message` in place of `delta`.
    message: Delta | None = None
    finish_reason: str | None = None


class TokenDetails(msgspec.Struct):
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


class UsageWire(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: TokenDetails | None = None
    completion_tokens_details: TokenDetails | None = None


class Chunk(msgspec.Struct):
    """One ``data:`` of a stream (``chat.completion.chunk``), or a mid-stream error."""

    choices: list[Choice] | None = None
    usage: UsageWire | None = None
    error: Any = None
    # "fp_ollama" on every chunk of Ollama's /v1.
    system_fingerprint: str | None = None


class Completion(msgspec.Struct):
    """A whole reply (``stream: false``)."""

    choices: list[Choice] | None = None
    usage: UsageWire | None = None
    error: Any = None


class ModelCard(msgspec.Struct):
    id: str
    created: int | None = None
    owned_by: str | None = None
    # vLLM and SGLang say the context length they serve with.
    max_model_len: int | None = None
    context_length: int | None = None
    root: str | None = None
    parent: str | None = None


class ModelList(msgspec.Struct):
    data: list[ModelCard] = msgspec.field(default_factory=list)


class Embedding(msgspec.Struct):
    embedding: list[float]
    index: int = 0


class EmbeddingList(msgspec.Struct):
    data: list[Embedding] = msgspec.field(default_factory=list)
    usage: UsageWire | None = None


class ErrorBody(msgspec.Struct):
    """``{"error": {...}}`` (OpenAI, new vLLM, llama.cpp) or a flat one (older vLLM)."""

    error: Any = None
    message: Any = None
    type: Any = None
    code: Any = None
    detail: Any = None
