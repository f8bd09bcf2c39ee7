"""``GeminiProvider``: chat, function calling, thinking, models, embeddings, token counts."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx
import msgspec

from ollm import __version__ as ollm_version
from ollm.errors import AuthenticationError, BadResponseError, ModelNotFoundError, OllmError
from ollm.kit import UsageAnchors, text_list
from ollm.types import (
    EmbeddingResult,
    HealthStatus,
    ModelCapabilities,
    ModelInfo,
    ProviderEvent,
    ProviderRequest,
    Usage,
)
from ollm_gemini._chat import stream_chat
from ollm_gemini._config import DEFAULT_BASE_URL, ENV_CONNECT_TIMEOUT, ENV_TIMEOUT, GeminiConfig
from ollm_gemini._convert import build_body
from ollm_gemini._errors import PROVIDER, error_from_reply, parse_error
from ollm_gemini._version import __version__
from ollm_gemini._wire import BatchEmbeddings, CountTokens, ModelCard, ModelList
from ollm_http import (
    NO_RETRY,
    ErrorContext,
    FrameStream,
    HTTPProvider,
    Limits,
    RetryPolicy,
    Timeouts,
    check_health,
    encode_body,
)

__all__ = ["GeminiProvider"]

log = logging.getLogger(__name__)

# How long what the API says about a model is reused (models rarely change).
MODELS_SECONDS = 300.0
# The share of the context window above which a count is asked of the API (exact)
# rather than estimated from the last reply's count.
EXACT_ABOVE = 0.5
# batchEmbedContents takes at most 100 requests.
EMBED_BATCH = 100
# The most models a listing reads (pages of 1,000), against a server that never ends it.
MAX_PAGES = 20
# An SSE event can be large (a whole function call, a long thought); it is bounded.
MAX_EVENT_BYTES = 16 * 1024 * 1024


def _context(config: GeminiConfig) -> ErrorContext:
    return ErrorContext(
        provider="the Gemini API",
        code_name=PROVIDER,
        url_setting=config.where,
        start_hint=None,
        timeout_setting=ENV_TIMEOUT,
        connect_timeout_setting=ENV_CONNECT_TIMEOUT,
        read_timeout_hint=(
            "a thinking model can take long before its first token: raise the timeout "
            f"({ENV_TIMEOUT}=1200)"
        ),
    )


class GeminiProvider(HTTPProvider):
    """Google's Gemini models through the Gemini API (``generativelanguage.googleapis.com``).

    Configuration comes from the arguments, else the environment: ``GEMINI_API_KEY``
    (or ``GOOGLE_API_KEY``), ``OLLM_GEMINI_BASE_URL``, ``OLLM_GEMINI_API_VERSION``
    (``v1beta``), ``OLLM_GEMINI_MODEL`` (the default model, ``gemini-2.5-flash``),
    ``OLLM_GEMINI_TIMEOUT`` (seconds to wait for the next bytes, 600) and
    ``OLLM_GEMINI_CONNECT_TIMEOUT`` (10). The key travels in the ``x-goog-api-key``
    header, never in a URL. ``affinity_header`` (or ``OLLM_GEMINI_AFFINITY_HEADER``)
    names a header that carries each chat's conversation id, for a gateway in front.

    Streaming chat with function calling (several calls per reply, their thought
    signatures kept for the next request), thinking (``think=True`` shows the model's
    thought summaries; a level ``"low"``...``"high"`` sets its budget), images, JSON
    output (``response_format``), safety blocks reported with their reason, exact token
    counts (``countTokens``) near the context window, the model list, embeddings
    (``batchEmbedContents``) and a health check.

    The provider keeps one connection pool, opened on first use; close it with
    ``await provider.aclose()`` or ``async with GeminiProvider() as provider``.
    """

    name = "gemini"
    handles_abort = True
    embed_batch_size = EMBED_BATCH
    wire = "the Gemini API's format"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        api_version: str | None = None,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        http: str | None = None,
        verify: bool | str | None = None,
        affinity_header: str | None = None,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = GeminiConfig.resolve(
            base_url,
            api_key=api_key,
            api_version=api_version,
            model=model,
            headers=headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            http=http,
            verify=verify,
            affinity_header=affinity_header,
            environ=os.environ if environ is None else environ,
        )
        config = self.config
        super().__init__(
            config.http_config(
                agent=f"ollm/{ollm_version} ollm-gemini/{__version__}",
                context=_context(config),
                headers={"x-goog-api-key": config.api_key} if config.api_key else {},
                limits=Limits(max_line=MAX_EVENT_BYTES),
            ),
            stack=config.http,
            transport=transport,
            retry=retry,
        )
        self.short_timeouts = Timeouts.quick(config.connect_timeout)
        self._anchors = UsageAnchors()
        self._cards: dict[str, tuple[float, ModelCard | None]] = {}

    @property
    def base_url(self) -> str:
        """The API's base URL (``https://generativelanguage.googleapis.com``)."""
        return self.config.base_url

    @property
    def default_model(self) -> str | None:
        """The model used when a chat names none (``OLLM_GEMINI_MODEL``)."""
        return self.config.default_model

    # -- requests ----------------------------------------------------------------------

    def precheck(self, method: str, path: str, *, model: str | None) -> OllmError | None:
        """Without a key, Google's own API is not asked at all: it would refuse."""
        if self.config.api_key is None and self.config.base_url == DEFAULT_BASE_URL:
            return AuthenticationError(
                "No Gemini API key is set. Set GEMINI_API_KEY (or GOOGLE_API_KEY) to a key from "
                "https://aistudio.google.com/apikey.",
                provider=PROVIDER,
                model=model,
            )
        return None

    def error_for(
        self, status: int, body: bytes, headers: httpx.Headers, *, path: str, model: str | None
    ) -> OllmError:
        """The API's error reply (a ``google.rpc.Status``) as an ``OllmError``."""
        return error_from_reply(
            parse_error(status, body), config=self.config, model=model, headers=headers
        )

    async def available_models(self) -> list[str] | None:
        """The models that can chat, for a ``MODEL_NOT_FOUND`` message."""
        cards = await self._models(short=True, pages=2)
        return [c.id for c in cards if "generateContent" in c.supportedGenerationMethods]

    async def _models(self, *, short: bool = False, pages: int = MAX_PAGES) -> list[ModelCard]:
        """Every model (``GET /v1beta/models``, page after page)."""
        cards: list[ModelCard] = []
        token: str | None = None
        version = self.config.api_version
        for _ in range(max(pages, 1)):
            query = "?pageSize=1000" + (f"&pageToken={quote(token, safe='')}" if token else "")
            listing: ModelList = await self.call(
                "GET",
                f"/{version}/models{query}",
                ModelList,
                timeouts=self.short_timeouts if short else None,
                retry=NO_RETRY if short else None,
            )
            cards.extend(listing.models)
            token = listing.nextPageToken
            if not token:
                break
        return cards

    # -- chat --------------------------------------------------------------------------

    def chat_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the reply to ``request``: text, thinking, function calls, then the finish."""
        return stream_chat(self, request)

    def _path(self, model: str, method: str) -> str:
        return f"{self.config.model_path(model)}:{method}"

    async def _send(
        self, frames: FrameStream, request: ProviderRequest, correction: str | None
    ) -> None:
        """Send the chat request of ``frames`` (with a ``correction`` turn, when asked)."""
        await frames.open(
            "POST",
            self._path(request.model, "streamGenerateContent") + "?alt=sse",
            build=lambda: self._body(request, correction),
        )

    def _body(self, request: ProviderRequest, correction: str | None = None) -> msgspec.Raw:
        """The request as JSON, encoded once per attempt (or ``InvalidRequestError``)."""
        body = build_body(request, api_version=self.config.api_version)
        if correction is not None:
            body["contents"].append({"role": "user", "parts": [{"text": correction}]})
        return encode_body(body, model=request.model, provider=PROVIDER)

    def _replied(self, request: ProviderRequest, usage: Usage | None) -> None:
        """Note what the API counted for a complete reply."""
        if usage is not None:
            self._anchors.remember(request, usage.prompt_tokens)

    # -- tokens and capabilities -------------------------------------------------------

    async def count_tokens(self, request: ProviderRequest) -> int:
        """The prompt tokens of ``request``.

        An estimate anchored on the API's count for the last reply (that count plus
        characters / 4 of what was added since); once the estimate passes half the
        model's input limit, the API's own count (``countTokens``), so that the limit
        is enforced on exact numbers. A failed exact count falls back on the estimate.
        """
        estimate = self._anchors.count(request)
        card = await self._card(request.model)
        limit = card.inputTokenLimit if card is not None else None
        if limit and estimate >= limit * EXACT_ABOVE:
            try:
                return await self.exact_tokens(request)
            except OllmError:
                log.debug("countTokens failed; estimating", exc_info=True)
        return estimate

    async def exact_tokens(self, request: ProviderRequest) -> int:
        """The API's count of the prompt tokens of ``request`` (``countTokens``)."""
        path = self._path(request.model, "countTokens")
        body = build_body(request, api_version=self.config.api_version)
        body["model"] = self.config.resource(request.model)
        result: CountTokens = await self.call(
            "POST",
            path,
            CountTokens,
            json={"generateContentRequest": body},
            model=request.model,
            timeouts=self.short_timeouts,
        )
        if result.totalTokens is None:
            raise BadResponseError(
                f"The Gemini API counted no tokens for {request.model!r}.", provider=PROVIDER
            )
        return result.totalTokens

    async def _card(self, model: str) -> ModelCard | None:
        """What the API says about ``model`` (``GET models/NAME``), cached; ``None`` if unknown."""
        cached = self._cards.get(model)
        if cached is not None and time.monotonic() - cached[0] < MODELS_SECONDS:
            return cached[1]
        card: ModelCard | None
        try:
            path = self.config.model_path(model)
            card = await self.call(
                "GET", path, ModelCard, model=model, timeouts=self.short_timeouts, retry=NO_RETRY
            )
        except Exception:
            log.debug("what the API says about %s is unknown", model, exc_info=True)
            card = None
        self._cards[model] = (time.monotonic(), card)
        return card

    async def model_capabilities(self, model: str) -> ModelCapabilities:
        """What ``model`` supports, from the API's description of it; ``None`` if unknown.

        Never fails for want of the API.
        """
        card = await self._card(model)
        if card is None:
            return ModelCapabilities()
        return _capabilities(card)

    # -- models ------------------------------------------------------------------------

    async def list_models(self) -> list[ModelInfo]:
        """Every model the key may use (all pages of ``GET models``), sorted by name."""
        cards = await self._models()
        now = time.monotonic()
        for card in cards:
            self._cards[card.id] = (now, card)
        return sorted((_info(card) for card in cards), key=lambda m: m.name)

    async def show_model(self, name: str) -> ModelInfo:
        """One model as the API describes it; ``ModelNotFoundError`` when it has none."""
        try:
            card: ModelCard = await self.call(
                "GET", self.config.model_path(name), ModelCard, model=name
            )
        except ModelNotFoundError:
            raise
        except OllmError as exc:
            if exc.status == 404:
                raise ModelNotFoundError(exc.message, provider=PROVIDER, model=name) from None
            raise
        self._cards[name] = (time.monotonic(), card)
        return _info(card)

    # -- embeddings and health ---------------------------------------------------------

    async def embed(
        self, model: str, texts: Sequence[str], *, dimensions: int | None = None
    ) -> EmbeddingResult:
        """One vector per text, in order (``batchEmbedContents``, 100 texts a request)."""
        items = text_list(texts)
        path = self._path(model, "batchEmbedContents")
        resource = self.config.resource(model)
        vectors: list[list[float]] = []
        size = max(1, min(self.embed_batch_size, EMBED_BATCH))
        for start in range(0, len(items), size):
            batch = items[start : start + size]
            requests: list[dict[str, Any]] = []
            for text in batch:
                one: dict[str, Any] = {"model": resource, "content": {"parts": [{"text": text}]}}
                if dimensions is not None:
                    one["outputDimensionality"] = dimensions
                requests.append(one)
            result: BatchEmbeddings = await self.call(
                "POST", path, BatchEmbeddings, json={"requests": requests}, model=model
            )
            if len(result.embeddings) != len(batch):
                raise BadResponseError(
                    f"The Gemini API returned {len(result.embeddings)} vectors for "
                    f"{len(batch)} texts. Check that {model!r} is an embedding model "
                    "(gemini-embedding-001).",
                    provider=PROVIDER,
                    model=model,
                )
            vectors.extend(item.values for item in result.embeddings)
        return EmbeddingResult(model=model, vectors=vectors)

    async def health(self) -> HealthStatus:
        """Whether the API answers the key's model list, and how fast. Never raises."""

        async def probe() -> None:
            await self._models(short=True, pages=1)

        return await check_health(self.name, probe, self.url)


def _capabilities(card: ModelCard) -> ModelCapabilities:
    methods = card.supportedGenerationMethods
    chats = "generateContent" in methods
    gemini = card.id.startswith("gemini")
    return ModelCapabilities(
        tools=True if chats and gemini else None,
        vision=True if chats and gemini else None,
        thinking=card.thinking,
        embedding=True if any(m.startswith("embed") for m in methods) else None,
        completion=chats,
        context_window=card.inputTokenLimit,
    )


def _info(card: ModelCard) -> ModelInfo:
    details: dict[str, Any] = {}
    for key in ("displayName", "description", "version", "outputTokenLimit", "baseModelId"):
        value = getattr(card, key)
        if value:
            details[key] = value
    if card.supportedGenerationMethods:
        details["methods"] = list(card.supportedGenerationMethods)
    return ModelInfo(name=card.id, capabilities=_capabilities(card), details=details)
