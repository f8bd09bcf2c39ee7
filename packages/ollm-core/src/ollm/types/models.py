"""What providers report about models, pulls, health and embeddings."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from ollm.types.events import Usage

__all__ = [
    "EmbeddingResult",
    "HealthStatus",
    "ModelCapabilities",
    "ModelInfo",
    "PullProgress",
    "RunningModel",
]


class ModelCapabilities(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a model can do. ``None`` means unknown (an older server may not say).

    ``tool_strategy`` names the registered tool-calling strategy that suits a model
    which cannot call tools natively (``"json-react"`` on a backend that constrains its
    replies to a JSON Schema, ``"react-example"`` for a very small model); the
    runtime's ``auto`` choice then uses it instead of ``react`` when it is installed,
    else ``fallback_tool_strategy`` when that one is: for a model known to lack native
    tools from the start, and for one that answers "does not support tools" although
    its capabilities did not say so.
    """

    tools: bool | None = None
    vision: bool | None = None
    thinking: bool | None = None
    embedding: bool | None = None
    completion: bool | None = None
    context_window: int | None = None
    tool_strategy: str | None = None
    fallback_tool_strategy: str | None = None
    # The longest context the model was trained for: a window may grow up to it
    # (context_window="auto").
    max_context_window: int | None = None


class ModelInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """A model a provider has (``list``) or describes (``show``)."""

    name: str
    size_bytes: int | None = None
    modified_at: datetime | None = None
    digest: str | None = None
    family: str | None = None
    parameter_size: str | None = None
    quantization: str | None = None
    format: str | None = None
    capabilities: ModelCapabilities | None = None
    parameters: dict[str, str] = msgspec.field(default_factory=dict)
    details: dict[str, Any] = msgspec.field(default_factory=dict)


class RunningModel(msgspec.Struct, frozen=True, omit_defaults=True):
    """A model loaded in memory right now."""

    name: str
    size_bytes: int | None = None
    vram_bytes: int | None = None
    expires_at: datetime | None = None
    context_window: int | None = None


class PullProgress(msgspec.Struct, frozen=True, omit_defaults=True):
    """One step of a model download."""

    status: str
    digest: str | None = None
    total: int | None = None
    completed: int | None = None

    @property
    def fraction(self) -> float | None:
        """Share of this layer downloaded, 0.0 to 1.0, when the size is known."""
        if not self.total:
            return None
        return min(1.0, (self.completed or 0) / self.total)


class HealthStatus(msgspec.Struct, frozen=True, omit_defaults=True):
    """Whether a provider's server answers, and how fast."""

    ok: bool
    provider: str
    checked_at: datetime
    latency_ms: float | None = None
    version: str | None = None
    error: str | None = None
    error_code: str | None = None


class EmbeddingResult(msgspec.Struct, frozen=True, omit_defaults=True):
    """One vector per input text, in the order of the inputs."""

    model: str
    vectors: list[list[float]]
    usage: Usage | None = None
