"""The requests of the Gemini provider, on ollm-http, failing with ollm's errors.

``ollm_http.HTTPClient`` holds the pool; this adds the key header, the routes, JSON
decoding and the wording of the API's errors. ``RESOURCE_EXHAUSTED`` (429) is tried
again after the ``RetryInfo`` delay the API gives, a bounded number of times, before
``RATE_LIMITED``; an overloaded or failing API (500, 503) is tried again after a short
backoff, as Google's SDKs do, before ``PROVIDER_ERROR``. Nothing is retried once the
reply's body has started: that reply is the user's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import msgspec

from ollm import __version__ as ollm_version
from ollm.errors import AuthenticationError, BadResponseError, OllmError
from ollm_gemini._config import (
    DEFAULT_BASE_URL,
    ENV_CONNECT_TIMEOUT,
    ENV_TIMEOUT,
    GeminiConfig,
)
from ollm_gemini._errors import PROVIDER, error_from_reply, parse_error
from ollm_gemini._version import __version__
from ollm_gemini._wire import ModelCard, ModelList
from ollm_http import (
    ErrorContext,
    HTTPClient,
    HTTPConfig,
    Limits,
    Reply,
    RetryPolicy,
    Timeouts,
    excerpt,
    with_retries,
)

__all__ = ["DEFAULT_RETRY", "GeminiHTTP"]

log = logging.getLogger(__name__)

DEFAULT_RETRY = RetryPolicy(attempts=3, backoff=1.0, max_wait=60.0)
STREAM_HEADERS = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}
_TRANSIENT = (500, 503)
# The most models a listing reads (pages of 1,000), against a server that never ends it.
MAX_PAGES = 20


def _context(config: GeminiConfig) -> ErrorContext:
    return ErrorContext(
        provider="The Gemini API",
        code_name=PROVIDER,
        url_setting=config.where,
        start_hint=None,
        timeout_setting=ENV_TIMEOUT,
        connect_timeout_setting=ENV_CONNECT_TIMEOUT,
        read_timeout_hint=(
            "a thinking model can take long before its first token: raise the timeout "
            f"({ENV_TIMEOUT}=1200, or timeout=...)"
        ),
    )


class GeminiHTTP:
    """Requests to the Gemini API."""

    def __init__(
        self,
        config: GeminiConfig,
        transport: httpx.AsyncBaseTransport | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.config = config
        self.retry = retry
        self.timeouts = Timeouts.uniform(config.connect_timeout, config.timeout)
        self.short_timeouts = Timeouts.quick(config.connect_timeout)
        headers = {
            "User-Agent": f"ollm/{ollm_version} ollm-gemini/{__version__}",
            "Accept": "application/json",
        }
        if config.api_key:
            headers["x-goog-api-key"] = config.api_key
        headers.update(config.headers)
        self._http = HTTPClient(
            HTTPConfig(
                config.base_url,
                headers=headers,
                timeouts=self.timeouts,
                limits=Limits(),
                verify=config.verify,
                trust_env=not config.loopback,
                context=_context(config),
            ),
            stack=config.http,
            transport=transport,
        )

    @property
    def url(self) -> str:
        """The API's base URL."""
        return self.config.base_url

    async def aclose(self) -> None:
        """Close the pool (a later request opens a new one)."""
        await self._http.aclose()

    def error(self, exc: BaseException, *, model: str | None, streaming: bool) -> OllmError:
        """The ``OllmError`` for a failure of the connection (``ollm_http``'s mapping)."""
        return self._http.error(exc, model=model, streaming=streaming)

    async def open(
        self,
        method: str,
        path: str,
        build: Callable[[], Any] | None = None,
        *,
        model: str | None = None,
        stream: bool = False,
        timeouts: Timeouts | None = None,
    ) -> Reply:
        """Send ``build()`` and return the reply, its body unread; an error status raises.

        Without a key, Google's own API is not asked at all: it would refuse.
        """
        if self.config.api_key is None and self.config.base_url == DEFAULT_BASE_URL:
            raise AuthenticationError(
                "No Gemini API key is set. Set GEMINI_API_KEY (or GOOGLE_API_KEY) to a key from "
                "https://aistudio.google.com/apikey, or pass api_key=...",
                provider=PROVIDER,
                model=model,
            )
        tries = max(self.retry.attempts, 1)

        async def attempt() -> Reply:
            for number in range(tries):
                reply = await self._http.open(
                    method,
                    path,
                    json=build() if build is not None else None,
                    headers=STREAM_HEADERS if stream else None,
                    timeouts=timeouts,
                    model=model,
                )
                if reply.status < 400:
                    return reply
                try:
                    content = await reply.aread()
                except OllmError:
                    content = b""
                finally:
                    await reply.aclose()
                said = parse_error(reply.status, content)
                if reply.status in _TRANSIENT and number + 1 < tries:
                    wait = self.retry.backoff * (2**number)
                    log.info("the Gemini API answered %s; trying again in %gs", said.code, wait)
                    await anyio.sleep(wait)
                    continue
                available = None
                if reply.status == 404 and model is not None:
                    available = await self.model_names()
                raise error_from_reply(
                    said,
                    config=self.config,
                    model=model,
                    headers=reply.headers,
                    available=available,
                )
            raise AssertionError("unreachable")  # pragma: no cover

        return await with_retries(self.retry, attempt)

    async def call(
        self,
        method: str,
        path: str,
        kind: type[Any],
        payload: Any = None,
        *,
        model: str | None = None,
        timeouts: Timeouts | None = None,
    ) -> Any:
        """A request and its JSON answer decoded as ``kind``."""
        build = (lambda: payload) if payload is not None else None
        reply = await self.open(method, path, build, model=model, timeouts=timeouts)
        try:
            content = await reply.aread()
        finally:
            await reply.aclose()
        return self.decode(content, kind, path)

    def decode(self, content: bytes, kind: type[Any], path: str) -> Any:
        """``content`` decoded as ``kind``, or ``BadResponseError`` naming where it broke."""
        try:
            return msgspec.json.decode(content, type=kind)
        except (msgspec.DecodeError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise BadResponseError(
                f"{self.url} answered {path.partition('?')[0]} with something that is not "
                f"the Gemini API's format ({reason}): {excerpt(content)}. Check "
                f"{self.config.where}.",
                provider=PROVIDER,
            ) from None

    async def models(self, *, short: bool = False, pages: int = MAX_PAGES) -> list[ModelCard]:
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
            )
            cards.extend(listing.models)
            token = listing.nextPageToken
            if not token:
                break
        return cards

    async def model_names(self) -> list[str] | None:
        """The models that can chat, for a message (``None`` when the API cannot say)."""
        try:
            cards = await self.models(short=True, pages=2)
        except OllmError:
            return None
        except Exception:
            log.debug("listing the models for a message failed", exc_info=True)
            return None
        return [c.id for c in cards if "generateContent" in c.supportedGenerationMethods]
