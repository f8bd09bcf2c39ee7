"""The provider contract, and the optional capabilities the runtime detects.

A provider is any object with a ``name`` and a ``chat_stream`` method. Everything else
is optional and separate: a provider that counts tokens also satisfies
``TokenCounting``; one that manages models satisfies ``ModelManagement``; and so on.
The runtime checks with ``isinstance(provider, TokenCounting)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol, runtime_checkable

from ollm.types.events import ProviderEvent
from ollm.types.models import (
    EmbeddingResult,
    HealthStatus,
    ModelCapabilities,
    ModelInfo,
    PullProgress,
    RunningModel,
)
from ollm.types.request import ProviderRequest

__all__ = [
    "Closeable",
    "Embeddings",
    "HealthChecking",
    "ModelInspection",
    "ModelManagement",
    "ProviderAdapter",
    "RunningModels",
    "TokenCounting",
]


@runtime_checkable
class ProviderAdapter(Protocol):
    """Connects the runtime to one backend.

    ``chat_stream`` yields provider events for one request and ends with exactly one
    ``FinishEvent``, or with an ``ErrorEvent`` when something failed; it should not
    raise. It must stop promptly when ``request.abort`` fires: a provider that checks
    the signal at its own waits (``with request.abort.guard(): ...`` around each
    network read) sets the class attribute ``handles_abort = True``; for any other
    provider the runtime guards every step of the stream itself, which is slower.
    Closing the iterator early (``aclose``) must release the connection.
    """

    @property
    def name(self) -> str:
        """The registry name, for example ``"ollama"``."""
        ...

    def chat_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the reply to ``request``."""
        ...


@runtime_checkable
class TokenCounting(Protocol):
    """A provider that estimates a request's prompt tokens better than characters / 4."""

    async def count_tokens(self, request: ProviderRequest) -> int:
        """A positive estimate of the prompt tokens ``request`` will use."""
        ...


@runtime_checkable
class ModelInspection(Protocol):
    """A provider that can say what a model supports."""

    async def model_capabilities(self, model: str) -> ModelCapabilities:
        """Tools, vision, thinking and context window; ``None`` fields are unknown."""
        ...


@runtime_checkable
class ModelListing(Protocol):
    """A provider that lists the models its server offers and describes one of them."""

    async def list_models(self) -> list[ModelInfo]:
        """The models available."""
        ...

    async def show_model(self, name: str) -> ModelInfo:
        """One model in detail (raises ``ModelNotFoundError`` if missing)."""
        ...


@runtime_checkable
class ModelManagement(ModelListing, Protocol):
    """A provider that also downloads and deletes models."""

    async def pull_model(
        self, name: str, *, on_progress: Callable[[PullProgress], object] | None = None
    ) -> None:
        """Download ``name``, calling ``on_progress`` at every step."""
        ...

    def stream_pull(self, name: str) -> AsyncIterator[PullProgress]:
        """Download ``name``, yielding each step."""
        ...

    async def delete_model(self, name: str) -> None:
        """Delete ``name`` (raises ``ModelNotFoundError`` if missing)."""
        ...


@runtime_checkable
class RunningModels(Protocol):
    """A provider that can say which models are loaded in memory."""

    async def running_models(self) -> list[RunningModel]:
        """Loaded models, latest to expire first."""
        ...


@runtime_checkable
class Embeddings(Protocol):
    """A provider that turns texts into vectors."""

    async def embed(self, model: str, texts: Sequence[str]) -> EmbeddingResult:
        """One vector per text, in order."""
        ...


@runtime_checkable
class HealthChecking(Protocol):
    """A provider that can check its server."""

    async def health(self) -> HealthStatus:
        """Never raises: a failure is a status with ``ok=False``."""
        ...


@runtime_checkable
class Closeable(Protocol):
    """A provider holding resources (a connection pool) to release on shutdown."""

    async def aclose(self) -> None:
        """Release them; the provider may not be used afterwards."""
        ...
