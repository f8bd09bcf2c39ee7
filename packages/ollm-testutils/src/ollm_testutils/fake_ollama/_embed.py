"""The embedding routes of the fake server: ``/api/embed`` and the legacy ``/api/embeddings``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from ollm_testutils._vectors import normalize, text_vector
from ollm_testutils.fake_ollama._exchange import Exchange
from ollm_testutils.fake_ollama._wire import WireError, decode_request, valid_name

if TYPE_CHECKING:
    from ollm_testutils.fake_ollama._server import FakeOllamaServer

__all__ = ["handle_embed", "handle_embeddings"]


class EmbedRequest(msgspec.Struct):
    model: str | None = None
    input: Any = None
    truncate: bool | None = None
    dimensions: int | None = None
    keep_alive: Any = None
    options: dict[str, Any] | None = None


class EmbedResponse(msgspec.Struct, kw_only=True, omit_defaults=True):
    model: str
    embeddings: list[list[float]]
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None


class LegacyEmbedRequest(msgspec.Struct):
    model: str | None = None
    prompt: str | None = None


class LegacyEmbedding(msgspec.Struct):
    embedding: list[float]


def _inputs(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise WireError(400, "invalid input type")


def _vector(server: FakeOllamaServer, text: str, size: int, salt: str) -> list[float]:
    planted = server.embedding_for(text)
    if planted is None:
        return text_vector(text, size, salt=salt)
    return normalize((planted + [0.0] * size)[:size])


def handle_embed(server: FakeOllamaServer, exchange: Exchange) -> None:
    """``POST /api/embed``: L2-normalized vectors in input order."""
    try:
        embed = decode_request(exchange.request.body, EmbedRequest, "EmbedRequest")
        name = embed.model or ""
        if not valid_name(name):
            raise WireError(400, "model is required")
        model = server.store.find(name)
        if model is None:
            raise WireError(404, f'model "{name}" not found, try pulling it first')
        texts = _inputs(embed.input)
        if embed.truncate is False and any(len(t) / 4 > model.context_length for t in texts):
            raise WireError(400, "the input length exceeds the context length")
        if embed.dimensions is not None and not 0 < embed.dimensions <= model.embedding_length:
            raise WireError(400, f"dimensions must be between 1 and {model.embedding_length}")
    except WireError as exc:
        exchange.error(exc.status, exc.message)
        return
    server.store.load(model, None, None)
    if not texts:
        exchange.json(EmbedResponse(model=name, embeddings=[]))
        return
    size = embed.dimensions or model.embedding_length
    vectors = [_vector(server, text, size, model.name) for text in texts]
    tokens = sum(max(1, -(-len(text) // 4)) for text in texts)
    exchange.json(
        EmbedResponse(
            model=name,
            embeddings=vectors,
            total_duration=14_143_917 + 1_000 * tokens,
            load_duration=1_019_500,
            prompt_eval_count=tokens,
        ),
    )


def handle_embeddings(server: FakeOllamaServer, exchange: Exchange) -> None:
    """``POST /api/embeddings`` (legacy): one vector, not normalized."""
    try:
        embed = decode_request(exchange.request.body, LegacyEmbedRequest, "EmbeddingRequest")
        name = embed.model or ""
        if not valid_name(name):
            raise WireError(400, "model is required")
        model = server.store.find(name)
        if model is None:
            raise WireError(404, f'model "{name}" not found, try pulling it first')
    except WireError as exc:
        exchange.error(exc.status, exc.message)
        return
    if not embed.prompt:
        exchange.json(LegacyEmbedding([]))
        return
    vector = text_vector(embed.prompt, model.embedding_length, salt=model.name)
    exchange.json(LegacyEmbedding([value * 7.5 for value in vector]))
