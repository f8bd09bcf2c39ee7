"""Embeddings through ``POST /api/embed``, in batches, in the order of the inputs."""

from __future__ import annotations

from collections.abc import Sequence

from ollm.errors import BadResponseError, OllmError
from ollm.kit import text_list
from ollm.types import EmbeddingResult, Usage
from ollm_http import HTTPProvider
from ollm_ollama._config import KeepAlive
from ollm_ollama._errors import PROVIDER
from ollm_ollama._wire import EmbedRequest, EmbedResponse

__all__ = ["DEFAULT_BATCH_SIZE", "embed"]

DEFAULT_BATCH_SIZE = 100


async def embed(
    http: HTTPProvider,
    model: str,
    texts: Sequence[str],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dimensions: int | None = None,
    truncate: bool | None = None,
    keep_alive: KeepAlive | None = None,
) -> EmbeddingResult:
    """One vector per text, in order; large inputs go in batches of ``batch_size``."""
    texts = text_list(texts)
    batch_size = max(1, batch_size)
    if not texts:
        # An empty input only loads the model on the server: nothing to send.
        return EmbeddingResult(model=model, vectors=[], usage=Usage())
    vectors: list[list[float]] = []
    usage = Usage()
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        request = EmbedRequest(
            model=model,
            input=batch,
            truncate=truncate,
            dimensions=dimensions,
            keep_alive=keep_alive,
        )
        try:
            answer: EmbedResponse = await http.call(
                "POST", "/api/embed", EmbedResponse, json=request, model=model
            )
        except OllmError as exc:
            raise _failed(exc, http, model, len(texts), start) from None
        got = answer.embeddings or []
        if len(got) != len(batch):
            raise BadResponseError(
                f"Provider 'ollama' could not embed with model {model!r}: the server at "
                f"{http.url} returned {len(got)} vectors for {len(batch)} texts. Try again; "
                "if it keeps happening, check the server's log.",
                provider=PROVIDER,
                model=model,
            )
        vectors.extend(got)
        prompt = answer.prompt_eval_count or 0
        usage = usage + Usage(
            prompt_tokens=prompt,
            total_tokens=prompt,
            total_duration_ns=answer.total_duration,
            load_duration_ns=answer.load_duration,
        )
    return EmbeddingResult(model=model, vectors=vectors, usage=usage)


def _failed(exc: OllmError, http: HTTPProvider, model: str, total: int, start: int) -> OllmError:
    """The same error, its message saying which provider, model and batch failed."""
    where = f" (texts {start + 1} and on of {total})" if start else ""
    message = f"Provider 'ollama' could not embed {total} texts with model {model!r}{where}: "
    message += exc.message
    error = type(exc)(message, provider=PROVIDER, model=model, status=exc.status)
    if error.code != exc.code:
        error.code = exc.code  # type: ignore[misc]
    return error
