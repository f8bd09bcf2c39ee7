"""``AnthropicProvider``: chat, parallel tool use, thinking, models, token counts."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import httpx
import msgspec

from ollm import __version__ as ollm_version
from ollm.errors import AuthenticationError, BadResponseError, ModelNotFoundError, OllmError
from ollm.kit import UsageAnchors
from ollm.types import (
    HealthStatus,
    ModelCapabilities,
    ModelInfo,
    NoticeEvent,
    ProviderEvent,
    ProviderRequest,
    Usage,
)
from ollm_anthropic._chat import stream_chat
from ollm_anthropic._config import (
    API_VERSION,
    ENV_API_KEY,
    ENV_CONNECT_TIMEOUT,
    ENV_TIMEOUT,
    AnthropicConfig,
)
from ollm_anthropic._convert import build_body, count_body
from ollm_anthropic._errors import OVERLOADED, PROVIDER, error_from_reply, parse_error
from ollm_anthropic._version import __version__
from ollm_anthropic._wire import CountTokens, ModelCard, ModelList
from ollm_http import (
    DEFAULT_RETRY,
    NO_RETRY,
    ErrorContext,
    HTTPProvider,
    Limits,
    RetryPolicy,
    Timeouts,
    check_health,
    encode_body,
)

__all__ = ["RETRY", "AnthropicProvider", "with_overloaded"]

log = logging.getLogger(__name__)


def with_overloaded(policy: RetryPolicy) -> RetryPolicy:
    """``policy`` with Anthropic's 529 "overloaded" tried again wherever 503 is."""
    if 503 not in policy.statuses or OVERLOADED in policy.statuses:
        return policy
    return replace(policy, statuses=policy.statuses | {OVERLOADED})


RETRY = with_overloaded(DEFAULT_RETRY)
# Every current Claude model's context window; a profile's context_window says another.
CONTEXT_WINDOW = 200_000
# Past this share of the window, the prompt is counted by the API (exact) rather than
# estimated from the last reply's count.
EXACT_ABOVE = 0.5
# The most models a listing reads (pages of 1,000), against a server that never ends it.
MAX_PAGES = 20
# An SSE event can be large (a whole tool input sent at once); it is bounded.
MAX_EVENT_BYTES = 16 * 1024 * 1024
_IGNORED = ("seed", "repeat_penalty")


def _context(config: AnthropicConfig) -> ErrorContext:
    return ErrorContext(
        provider="the Anthropic API" if config.official else "the Messages API server",
        code_name=PROVIDER,
        url_setting=config.where,
        start_hint=None,
        timeout_setting=ENV_TIMEOUT,
        connect_timeout_setting=ENV_CONNECT_TIMEOUT,
        read_timeout_hint=(
            f"a thinking model can take long before its first token: raise the timeout "
            f"({ENV_TIMEOUT}=1200)"
        ),
    )


class AnthropicProvider(HTTPProvider):
    """Claude, and the servers that speak Anthropic's Messages API.

    Configuration comes from the arguments, else a profile (``profile="local"``, from
    ``anthropic.toml``), else the environment: ``ANTHROPIC_API_KEY``,
    ``ANTHROPIC_BASE_URL`` (``https://api.anthropic.com``), ``OLLM_ANTHROPIC_MODEL``
    (``claude-sonnet-4-6``), ``ANTHROPIC_AUTH_TOKEN`` (a bearer token, for a gateway),
    ``OLLM_ANTHROPIC_MAX_TOKENS`` (the reply's limit when a
    request sets none: else 8,192, 4,096 for Claude 3 Haiku, Sonnet and Opus),
    ``OLLM_ANTHROPIC_PROMPT_CACHE=1`` (``cache_control`` on the system prompt, the tools
    and the conversation; off by default: a cache write costs 1.25 times a prompt token,
    a read a tenth), ``OLLM_ANTHROPIC_TIMEOUT`` (600) and
    ``OLLM_ANTHROPIC_CONNECT_TIMEOUT`` (10). Every request carries ``x-api-key`` and
    ``anthropic-version: 2023-06-01``.

    Streaming chat with parallel tool use, thinking (``think=True`` or a level
    ``"low"``...``"high"``: a budget of tokens; its blocks and their signatures go back
    unchanged in a tool loop), images, typed output through a forced tool, stop reasons,
    usage with the prompt cache's reads and writes, the model list, exact token counts
    (``count_tokens``) near the context window, and a health check. 529 (overloaded) is
    tried again like 503.
    """

    name = "anthropic"
    handles_abort = True
    wire = "the Messages API's format"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        auth_token: str | None = None,
        base_url: str | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        prompt_cache: bool | None = None,
        context_window: int | None = None,
        profile: str | None = None,
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
        self.config = AnthropicConfig.resolve(
            base_url,
            api_key=api_key,
            auth_token=auth_token,
            model=model,
            max_tokens=max_tokens,
            prompt_cache=prompt_cache,
            context_window=context_window,
            profile=profile,
            headers=headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            http=http,
            verify=verify,
            affinity_header=affinity_header,
            environ=environ,
        )
        config = self.config
        if profile is not None:
            self.name = config.provider_name
        own = {"anthropic-version": API_VERSION}
        if config.api_key:
            own["x-api-key"] = config.api_key
        if config.auth_token:
            own["Authorization"] = f"Bearer {config.auth_token}"
        super().__init__(
            config.http_config(
                agent=f"ollm/{ollm_version} ollm-anthropic/{__version__}",
                context=_context(config),
                headers=own,
                limits=Limits(max_line=MAX_EVENT_BYTES),
            ),
            stack=config.http,
            transport=transport,
            # Whatever policy is given treats 529 as it treats 503.
            retry=RETRY if retry is None else with_overloaded(retry),
        )
        self.short_timeouts = Timeouts.quick(config.connect_timeout)
        self._anchors = UsageAnchors()

    @property
    def base_url(self) -> str:
        """The API's base URL (``https://api.anthropic.com``)."""
        return self.config.base_url

    @property
    def default_model(self) -> str | None:
        """The model used when a chat names none (``OLLM_ANTHROPIC_MODEL``)."""
        return self.config.default_model

    # -- requests ----------------------------------------------------------------------

    def precheck(self, method: str, path: str, *, model: str | None) -> OllmError | None:
        """Without a key, Anthropic's own API is not asked at all: it would refuse."""
        config = self.config
        if config.api_key is None and config.auth_token is None and config.official:
            return AuthenticationError(
                f"No Anthropic API key is set. Set {ENV_API_KEY} to a key from "
                "https://console.anthropic.com/settings/keys.",
                provider=PROVIDER,
                model=model,
            )
        return None

    def error_for(
        self, status: int, body: bytes, headers: httpx.Headers, *, path: str, model: str | None
    ) -> OllmError:
        """The API's error reply as an ``OllmError``."""
        return error_from_reply(
            parse_error(status, body), config=self.config, model=model, headers=headers
        )

    async def available_models(self) -> list[str] | None:
        """The models there are, for a ``MODEL_NOT_FOUND`` message."""
        return [card.id for card in await self._models(short=True, pages=1)]

    async def _models(self, *, short: bool = False, pages: int = MAX_PAGES) -> list[ModelCard]:
        """Every model (``GET /v1/models``, page after page)."""
        cards: list[ModelCard] = []
        after: str | None = None
        for _ in range(max(pages, 1)):
            query = "?limit=1000" + (f"&after_id={quote(after, safe='')}" if after else "")
            listing: ModelList = await self.call(
                "GET",
                f"/v1/models{query}",
                ModelList,
                timeouts=self.short_timeouts if short else None,
                retry=NO_RETRY if short else None,
            )
            cards.extend(listing.data)
            after = listing.last_id
            if not listing.has_more or not after:
                break
        return cards

    # -- chat --------------------------------------------------------------------------

    def chat_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the reply to ``request``: text, thinking, tool calls, then the finish."""
        return stream_chat(self, request)

    def body(self, request: ProviderRequest) -> msgspec.Raw:
        """The request as JSON, encoded once per attempt (or ``InvalidRequestError``)."""
        body = build_body(
            request, max_tokens=self.config.max_tokens, prompt_cache=self.config.prompt_cache
        )
        return encode_body(body, model=request.model, provider=PROVIDER)

    def notices(self, request: ProviderRequest) -> list[NoticeEvent]:
        """What the request asks that the Messages API has no field for, said once."""
        options = request.options
        left = [name for name in _IGNORED if getattr(options, name) is not None]
        if not left:
            return []
        return [
            NoticeEvent(f"The Messages API has no {' or '.join(left)}; not sent.", "option_ignored")
        ]

    def replied(self, request: ProviderRequest, usage: Usage | None) -> None:
        """Note what the API counted for a complete reply."""
        if usage is not None:
            self._anchors.remember(request, usage.prompt_tokens)

    # -- tokens and capabilities -------------------------------------------------------

    async def count_tokens(self, request: ProviderRequest) -> int:
        """The prompt tokens of ``request``.

        An estimate anchored on the API's count for the last reply; once it passes half
        the context window and a key is set, the API's own count
        (``/v1/messages/count_tokens``), so that the limit is enforced on exact numbers.
        A failed exact count falls back on the estimate.
        """
        estimate = self._anchors.count(request)
        window = self.config.context_window or CONTEXT_WINDOW
        if self.config.api_key and estimate >= window * EXACT_ABOVE:
            try:
                return await self.exact_tokens(request)
            except OllmError:
                log.debug("count_tokens failed; estimating", exc_info=True)
        return estimate

    async def exact_tokens(self, request: ProviderRequest) -> int:
        """The API's count of the prompt tokens of ``request`` (``count_tokens``)."""
        result: CountTokens = await self.call(
            "POST",
            "/v1/messages/count_tokens",
            CountTokens,
            json=count_body(request),
            model=request.model,
            timeouts=self.short_timeouts,
        )
        if result.input_tokens is None:
            raise BadResponseError(
                f"{self.context.provider} counted no tokens for {request.model!r}.",
                provider=PROVIDER,
            )
        return result.input_tokens

    async def model_capabilities(self, model: str) -> ModelCapabilities:
        """What ``model`` supports: Claude models have tools, vision and thinking."""
        claude = model.startswith("claude")
        return ModelCapabilities(
            tools=True,
            vision=True if claude else None,
            # Extended thinking came with Claude 3.7 Sonnet; the other Claude 3 models lack it.
            thinking=True
            if claude and (not model.startswith("claude-3-") or "3-7" in model)
            else None,
            completion=True,
            context_window=self.config.context_window or (CONTEXT_WINDOW if claude else None),
        )

    # -- models ------------------------------------------------------------------------

    async def list_models(self) -> list[ModelInfo]:
        """Every model the key may use (all pages of ``GET /v1/models``), sorted by name."""
        infos = [await self._info(card) for card in await self._models()]
        return sorted(infos, key=lambda m: m.name)

    async def show_model(self, name: str) -> ModelInfo:
        """One model as the API describes it; ``ModelNotFoundError`` when it has none."""
        try:
            card: ModelCard = await self.call(
                "GET", f"/v1/models/{quote(name, safe='')}", ModelCard, model=name
            )
        except ModelNotFoundError:
            raise
        except OllmError as exc:
            if exc.status == 404:
                raise ModelNotFoundError(exc.message, provider=PROVIDER, model=name) from None
            raise
        return await self._info(card)

    async def _info(self, card: ModelCard) -> ModelInfo:
        details: dict[str, Any] = {}
        if card.display_name:
            details["display_name"] = card.display_name
        if card.created_at:
            details["created_at"] = card.created_at
        return ModelInfo(
            name=card.id, capabilities=await self.model_capabilities(card.id), details=details
        )

    async def health(self) -> HealthStatus:
        """Whether the API answers the key's model list, and how fast. Never raises."""

        async def probe() -> None:
            await self._models(short=True, pages=1)

        return await check_health(self.name, probe, self.url)
