"""Optional capabilities for the mock providers: model management and embeddings.

A mock gets them only when asked (``models=`` or ``embedding_dimensions=`` on its
constructor), as instance attributes, so that ``isinstance(provider, ModelManagement)``
is true exactly then.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import UTC, datetime

import anyio

from ollm.errors import ModelNotFoundError
from ollm.types import EmbeddingResult, ModelInfo, PullProgress, Usage
from ollm_testutils._vectors import text_vector

__all__ = ["MockEmbeddings", "MockModels"]


def _key(name: str) -> str:
    """``llama3.2`` and ``llama3.2:latest`` are the same model."""
    last = name.rsplit("/", 1)[-1]
    return name.lower() if ":" in last else f"{name.lower()}:latest"


class MockModels:
    """Local models a mock provider lists, shows, pulls and deletes.

    ``models`` are present from the start (names or ``ModelInfo``). ``available`` are
    the names ``pull`` can fetch; ``None`` lets any name be pulled. Pulling yields
    ``PullProgress`` steps like Ollama's (manifest, a layer in four steps, verify,
    write, success), waiting ``step_delay`` seconds between them.
    """

    def __init__(
        self,
        models: Iterable[ModelInfo | str] = (),
        *,
        available: Iterable[str] | None = None,
        step_delay: float = 0.0,
        provider: str = "mock",
    ) -> None:
        self.models: dict[str, ModelInfo] = {}
        for model in models:
            info = model if isinstance(model, ModelInfo) else ModelInfo(name=model)
            self.models[_key(info.name)] = info
        self.available = None if available is None else {_key(name) for name in available}
        self.step_delay = step_delay
        self.provider = provider
        self.pulled: list[str] = []
        self.deleted: list[str] = []

    async def list_models(self) -> list[ModelInfo]:
        """The models present now."""
        return list(self.models.values())

    async def show_model(self, name: str) -> ModelInfo:
        """One model; ``ModelNotFoundError`` if absent."""
        model = self.models.get(_key(name))
        if model is None:
            raise self._missing(name)
        return model

    async def stream_pull(self, name: str) -> AsyncIterator[PullProgress]:
        """Download ``name`` step by step."""
        yield PullProgress("pulling manifest")
        if self.available is not None and _key(name) not in self.available:
            raise ModelNotFoundError(
                f"Model {name!r} does not exist in the registry ({self.provider}). "
                "Check the name, for example on https://ollama.com/library.",
                provider=self.provider,
                model=name,
            )
        digest = hashlib.sha256(name.encode()).hexdigest()
        total = 2_000_000
        for completed in (None, total // 4, total // 2, 3 * total // 4, total):
            await self._pause()
            yield PullProgress(f"pulling {digest[:12]}", f"sha256:{digest}", total, completed)
        for status in ("verifying sha256 digest", "writing manifest", "success"):
            await self._pause()
            yield PullProgress(status)
        self.models[_key(name)] = ModelInfo(
            name=_key(name), size_bytes=total, digest=digest, modified_at=datetime.now(UTC)
        )
        self.pulled.append(name)

    async def pull_model(
        self, name: str, *, on_progress: Callable[[PullProgress], object] | None = None
    ) -> None:
        """Download ``name``, reporting each step to ``on_progress``."""
        async for step in self.stream_pull(name):
            if on_progress is not None:
                on_progress(step)

    async def delete_model(self, name: str) -> None:
        """Remove ``name``; ``ModelNotFoundError`` if absent."""
        if self.models.pop(_key(name), None) is None:
            raise self._missing(name)
        self.deleted.append(name)

    async def _pause(self) -> None:
        if self.step_delay:
            await anyio.sleep(self.step_delay)

    def _missing(self, name: str) -> ModelNotFoundError:
        have = ", ".join(model.name for model in self.models.values()) or "none"
        return ModelNotFoundError(
            f"Model {name!r} is not available from {self.provider} (it has: {have}). "
            f"Pull it first: ollm models pull {name}",
            provider=self.provider,
            model=name,
        )


class MockEmbeddings:
    """Deterministic embeddings: the same text always gives the same unit vector."""

    def __init__(self, dimensions: int = 8) -> None:
        if dimensions < 1:
            raise ValueError("embedding dimensions must be positive")
        self.dimensions = dimensions

    async def embed(self, model: str, texts: Sequence[str]) -> EmbeddingResult:
        """One L2-normalized vector per text, in order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts, not one string")
        vectors = [text_vector(text, self.dimensions, salt=model) for text in texts]
        tokens = sum(max(1, len(text.split())) for text in texts)
        return EmbeddingResult(
            model=model,
            vectors=vectors,
            usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
        )
