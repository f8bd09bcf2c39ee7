"""The Gemini API's replies, as far as ollm reads them (see WIRE.md).

Only the fields ollm reads are declared; msgspec skips the rest without building them.
Every field may be missing: the API leaves out empty and default values (proto3 JSON).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "BatchEmbeddings",
    "Candidate",
    "CountTokens",
    "ErrorBody",
    "GenerateResponse",
    "ModelCard",
    "ModelList",
    "UsageMetadata",
]


class FunctionCall(msgspec.Struct):
    name: str | None = None
    # An object by the API's reference; kept as Any to report anything else clearly.
    args: Any = None
    id: str | None = None


class Part(msgspec.Struct):
    text: str | None = None
    thought: bool | None = None
    thoughtSignature: str | None = None
    functionCall: FunctionCall | None = None


class Content(msgspec.Struct):
    role: str | None = None
    parts: list[Part] | None = None


class SafetyRating(msgspec.Struct):
    category: str | None = None
    probability: str | None = None
    blocked: bool | None = None


class Candidate(msgspec.Struct):
    content: Content | None = None
    finishReason: str | None = None
    finishMessage: str | None = None
    safetyRatings: list[SafetyRating] | None = None
    index: int = 0


class PromptFeedback(msgspec.Struct):
    blockReason: str | None = None
    blockReasonMessage: str | None = None
    safetyRatings: list[SafetyRating] | None = None


class UsageMetadata(msgspec.Struct):
    promptTokenCount: int | None = None
    candidatesTokenCount: int | None = None
    totalTokenCount: int | None = None
    thoughtsTokenCount: int | None = None
    cachedContentTokenCount: int | None = None
    toolUsePromptTokenCount: int | None = None


class GenerateResponse(msgspec.Struct):
    """One ``GenerateContentResponse`` (a whole reply, or one event of a stream)."""

    candidates: list[Candidate] | None = None
    promptFeedback: PromptFeedback | None = None
    usageMetadata: UsageMetadata | None = None
    modelVersion: str | None = None
    # Not in the reference's response, but what a stream carries when it fails part way.
    error: Any = None


class ModelCard(msgspec.Struct):
    name: str = ""
    baseModelId: str | None = None
    version: str | None = None
    displayName: str | None = None
    description: str | None = None
    inputTokenLimit: int | None = None
    outputTokenLimit: int | None = None
    supportedGenerationMethods: list[str] = msgspec.field(default_factory=list)
    thinking: bool | None = None
    temperature: float | None = None
    maxTemperature: float | None = None
    topP: float | None = None
    topK: int | None = None

    @property
    def id(self) -> str:
        """The name without ``models/`` (what ``-m`` takes)."""
        return self.name.removeprefix("models/")


class ModelList(msgspec.Struct):
    models: list[ModelCard] = msgspec.field(default_factory=list)
    nextPageToken: str | None = None


class CountTokens(msgspec.Struct):
    totalTokens: int | None = None


class Embedding(msgspec.Struct):
    values: list[float] = msgspec.field(default_factory=list)


class BatchEmbeddings(msgspec.Struct):
    embeddings: list[Embedding] = msgspec.field(default_factory=list)


class ErrorBody(msgspec.Struct):
    """``{"error": {"code", "message", "status", "details"}}`` (google.rpc.Status)."""

    error: Any = None
