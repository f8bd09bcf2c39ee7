"""The requests of the OpenAI-compatible provider, on ollm-http, failing with ollm's errors.

``ollm_http.HTTPClient`` holds the pool (one per event loop, ollm's llhttp transport,
or httpx's own stack behind a proxy, for ``https://`` or with ``http="httpx"``); this
adds the headers (key, organisation, project), the routes, JSON decoding and the
wording of the server's error replies. A 429 (or a 503 with ``Retry-After``) is tried
again as the server asks, a bounded number of times, before ``RATE_LIMITED``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
import msgspec

from ollm import __version__ as ollm_version
from ollm.errors import BadResponseError, ModelNotFoundError, OllmError
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
from ollm_openai._config import ENV_CONNECT_TIMEOUT, ENV_TIMEOUT, OpenAIConfig
from ollm_openai._errors import PROVIDER, ServerError, error_from_reply, parse_error
from ollm_openai._version import __version__
from ollm_openai._wire import ModelList

__all__ = ["DEFAULT_RETRY", "OpenAIHTTP"]

log = logging.getLogger(__name__)

DEFAULT_RETRY = RetryPolicy(attempts=3, backoff=1.0, max_wait=30.0)
STREAM_HEADERS = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}

Adjust = Callable[[ServerError], bool]
"""Looks at a refusal and changes the request so that it can be sent again (True)."""


def _context(config: OpenAIConfig) -> ErrorContext:
    official = config.official
    return ErrorContext(
        provider="OpenAI" if official else "The OpenAI-compatible server",
        code_name=PROVIDER,
        url_setting=config.where,
        start_hint=(
            None
            if official
            else "Start it (vllm serve MODEL, llama-server -m FILE --jinja, lms server start...), "
            f"or check {config.where}."
        ),
        timeout_setting=ENV_TIMEOUT,
        connect_timeout_setting=ENV_CONNECT_TIMEOUT,
        read_timeout_hint=(
            "a large model can take long to load or to think before its first token: raise "
            f"the timeout ({ENV_TIMEOUT}=1200, timeout = ... in the profile, or timeout=...)"
        ),
    )


class OpenAIHTTP:
    """Requests to one OpenAI-compatible server."""

    def __init__(
        self,
        config: OpenAIConfig,
        transport: httpx.AsyncBaseTransport | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.config = config
        self.retry = retry
        self.timeouts = Timeouts.uniform(config.connect_timeout, config.timeout)
        self.short_timeouts = Timeouts.quick(config.connect_timeout)
        headers = {
            "User-Agent": f"ollm/{ollm_version} ollm-openai/{__version__}",
            "Accept": "application/json",
        }
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        if config.organization:
            headers["OpenAI-Organization"] = config.organization
        if config.project:
            headers["OpenAI-Project"] = config.project
        headers.update(config.headers)
        self.context = _context(config)
        self._http = HTTPClient(
            HTTPConfig(
                config.base_url,
                headers=headers,
                timeouts=self.timeouts,
                limits=Limits(),
                verify=config.verify,
                trust_env=not config.loopback,
                context=self.context,
            ),
            stack=config.http,
            transport=transport,
        )

    @property
    def url(self) -> str:
        """The server's base URL."""
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
        build: Callable[[], Any],
        *,
        model: str | None = None,
        stream: bool = False,
        timeouts: Timeouts | None = None,
        adjust: Adjust | None = None,
    ) -> Reply:
        """Send ``build()`` and return the reply, its body unread; an error status raises.

        A refusal that ``adjust`` can fix (an option this server does not take) is sent
        again once per fix; a rate limit is retried as ``self.retry`` allows.
        """

        async def attempt() -> Reply:
            for _ in range(4):
                reply = await self._http.open(
                    method,
                    path,
                    json=build() if method != "GET" else None,
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
                if adjust is not None and reply.status in (400, 422) and adjust(said):
                    continue
                available = None
                if reply.status == 404 and model is not None and said.mentions("model"):
                    available = await self.model_names()
                raise error_from_reply(
                    said,
                    config=self.config,
                    path=path,
                    model=model,
                    headers=reply.headers,
                    available=available,
                )
            raise BadResponseError(
                f"The server at {self.url} kept refusing the request to {path}.",
                provider=PROVIDER,
                model=model,
            )

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
        reply = await self.open(method, path, lambda: payload, model=model, timeouts=timeouts)
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
                f"The server at {self.url} answered {path} with something that is not in "
                f"the OpenAI format ({reason}): {excerpt(content)}. Check that "
                f"{self.config.where} is an OpenAI-compatible API (it usually ends with /v1).",
                provider=PROVIDER,
            ) from None

    async def models(self, *, short: bool = False) -> ModelList:
        """``GET /models``."""
        result: ModelList = await self.call(
            "GET", "/models", ModelList, timeouts=self.short_timeouts if short else None
        )
        return result

    async def model_names(self) -> list[str] | None:
        """The ids the server lists, for a message (``None`` when it cannot say)."""
        try:
            listing = await self.models(short=True)
        except (OllmError, ModelNotFoundError):
            return None
        except Exception:
            log.debug("listing the models for a message failed", exc_info=True)
            return None
        return [card.id for card in listing.data]
