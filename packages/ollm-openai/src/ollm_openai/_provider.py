"""``OpenAIProvider``: chat, tools, models and embeddings on any OpenAI-compatible server."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec

from ollm import __version__ as ollm_version
from ollm.errors import (
    BadResponseError,
    InvalidRequestError,
    ModelNotFoundError,
    OllmError,
)
from ollm.kit import UsageAnchors, quote
from ollm.types import (
    EmbeddingResult,
    HealthStatus,
    ModelCapabilities,
    ModelInfo,
    NoticeEvent,
    ProviderEvent,
    ProviderRequest,
    Usage,
)
from ollm_http import (
    NO_RETRY,
    Adjust,
    ErrorContext,
    FrameStream,
    HTTPProvider,
    RetryPolicy,
    Timeouts,
    check_health,
    encode_body,
)
from ollm_openai._chat import stream_chat, usage_from
from ollm_openai._config import (
    ENV_CONNECT_TIMEOUT,
    ENV_TIMEOUT,
    Engine,
    MaxTokensField,
    OpenAIConfig,
)
from ollm_openai._convert import FormatRung, build_body, response_format_at
from ollm_openai._errors import PROVIDER, Refusal, error_from_reply, parse_error
from ollm_openai._version import __version__
from ollm_openai._wire import EmbeddingList, ModelCard, ModelList

__all__ = ["OpenAIProvider"]

log = logging.getLogger(__name__)

# How long a model list is reused for capabilities (a server's models rarely change).
MODELS_SECONDS = 60.0
# How a server names the response format it refuses (llama-cpp-python's validation
# dump, llama.cpp's 'response_format type must be one of "text" or "json_object"',
# older vLLM and LM Studio).
_FORMAT_WORDS = ("response_format", "response format", "json_schema", "json_object")
# The engine a model list's `owned_by` names (llama-cpp-python says "me"; Ollama's
# library models "library").
_OWNERS: dict[str, Engine] = {
    "vllm": "vllm",
    "sglang": "sglang",
    "llamacpp": "llamacpp",
    "me": "llamacpp",
    "library": "ollama",
}
_OTHER_FIELD: dict[MaxTokensField, MaxTokensField] = {
    "max_tokens": "max_completion_tokens",
    "max_completion_tokens": "max_tokens",
}


def _context(config: OpenAIConfig) -> ErrorContext:
    official = config.official
    return ErrorContext(
        provider="OpenAI" if official else "the OpenAI-compatible server",
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
            f"the timeout ({ENV_TIMEOUT}=1200, or timeout = ... in the profile)"
        ),
    )


def _headers(config: OpenAIConfig) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    if config.organization:
        headers["OpenAI-Organization"] = config.organization
    if config.project:
        headers["OpenAI-Project"] = config.project
    return headers


class OpenAIProvider(HTTPProvider):
    """A provider for servers that speak OpenAI's Chat Completions API.

    OpenAI itself, vLLM, SGLang, llama.cpp's ``llama-server``, LM Studio, a LiteLLM
    proxy, Ollama's ``/v1``. Configuration comes from the arguments, else a named
    ``profile`` (``openai.toml``, see ``ollm_openai.profiles_path()``), else the
    environment: ``OPENAI_BASE_URL`` (default ``https://api.openai.com/v1``),
    ``OPENAI_API_KEY`` (optional for local servers), ``OPENAI_ORG_ID``,
    ``OPENAI_PROJECT_ID``, ``OLLM_OPENAI_MODEL`` (the default model),
    ``OLLM_OPENAI_TIMEOUT`` (seconds to wait for the server's next bytes, 600) and
    ``OLLM_OPENAI_CONNECT_TIMEOUT`` (10).

    What the server's models can do is not in the API: say it with ``tools=``,
    ``vision=``, ``thinking=`` and ``context_window=`` (or in the profile) when you
    know; the context window is read from the model list where the server gives it
    (vLLM's ``max_model_len``), and a server that refuses tools makes the runtime
    switch to ReAct on its own. ``stream=False`` asks for whole replies (for a proxy
    that buffers streams). ``retry`` bounds the waiting on HTTP 429. For a router in
    front of several servers, ``affinity_header`` (``x-session-id``...) and
    ``affinity_user=True`` send each chat's conversation id in that header and as the
    ``user`` field.

    The provider keeps one connection pool, opened on first use; close it with
    ``await provider.aclose()`` or ``async with OpenAIProvider(...) as provider``.
    """

    name = "openai"
    handles_abort = True
    embed_batch_size = 256
    wire = "the OpenAI format"

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        model: str | None = None,
        organization: str | None = None,
        project: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        profile: str | None = None,
        tools: bool | None = None,
        vision: bool | None = None,
        thinking: bool | None = None,
        context_window: int | None = None,
        max_tokens_field: MaxTokensField | None = None,
        stream_usage: bool | None = None,
        stream: bool | None = None,
        engine: Engine | None = None,
        verify: bool | str | None = None,
        http: str | None = None,
        affinity_header: str | None = None,
        affinity_user: bool | None = None,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = OpenAIConfig.resolve(
            base_url,
            api_key=api_key,
            organization=organization,
            project=project,
            headers=headers,
            model=model,
            timeout=timeout,
            connect_timeout=connect_timeout,
            profile=profile,
            http=http,
            affinity_header=affinity_header,
            environ=os.environ if environ is None else environ,
            tools=tools,
            vision=vision,
            thinking=thinking,
            context_window=context_window,
            max_tokens_field=max_tokens_field,
            stream_usage=stream_usage,
            stream=stream,
            verify=verify,
            affinity_user=affinity_user,
            engine=engine,
        )
        config = self.config
        self.name = config.provider_name
        super().__init__(
            config.http_config(
                agent=f"ollm/{ollm_version} ollm-openai/{__version__}",
                context=_context(config),
                headers=_headers(config),
            ),
            stack=config.http,
            transport=transport,
            retry=retry,
        )
        self._short = Timeouts.quick(config.connect_timeout)
        # Learnt from the server's refusals, for the life of the provider.
        self._include_usage = self.config.stream_usage is not False
        self._max_tokens_field: MaxTokensField = self.config.max_tokens_field or (
            "max_completion_tokens" if self.config.official else "max_tokens"
        )
        # The engine (option names): configured, else detected once from the model list.
        self._engine: Engine | None = config.known_engine
        self._engine_known = self._engine is not None
        self._dropped_noted = False
        # The typed-output ladder, per model: json_schema, json_object, prompted.
        self._format_rungs: dict[str, FormatRung] = {}
        self._anchors = UsageAnchors()
        self._window_warned = False
        self._models: tuple[float, dict[str, ModelCard]] | None = None

    @property
    def base_url(self) -> str:
        """The server's base URL, for example ``http://127.0.0.1:8000/v1``."""
        return self.config.base_url

    @property
    def default_model(self) -> str | None:
        """The model used when a chat names none (``OLLM_OPENAI_MODEL``, the profile's)."""
        return self.config.default_model

    # -- chat --------------------------------------------------------------------------

    def chat_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the reply to ``request``: text, thinking, tool calls, then the finish."""
        return stream_chat(self, request)

    def _body(self, request: ProviderRequest, *, stream: bool) -> msgspec.Raw:
        """The request as JSON, encoded once per attempt (or ``InvalidRequestError``)."""
        body = build_body(
            request,
            self.config,
            stream=stream,
            include_usage=self._include_usage,
            max_tokens_field=self._max_tokens_field,
            format_rung=self._format_rungs.get(request.model, "json_schema"),
            engine=self._engine,
        )
        return encode_body(body, model=request.model, provider=PROVIDER)

    async def _send(
        self, frames: FrameStream, request: ProviderRequest, *, streaming: bool
    ) -> list[NoticeEvent]:
        """Send the chat request of ``frames``: the body built anew for each attempt, an
        option the server refuses dropped or swapped (``_adjust``). The notices: an
        option the engine does not take (once), the typed output's next rung after the
        server refused its ``response_format``."""
        notices: list[NoticeEvent] = []
        options = request.options
        if request.response_format is not None:
            await self._detect_engine(request.model)  # json_object's schema (llama.cpp)
        if options.repeat_penalty is not None or options.top_k is not None:
            await self._detect_engine(request.model)
            dropped = self._dropped_notice(request)
            if dropped is not None:
                notices.append(dropped)
        moved: list[NoticeEvent] = []
        await frames.open(
            "POST",
            "/chat/completions",
            build=lambda: self._body(request, stream=streaming),
            adjust=self._adjust(request, stream=streaming, moved=moved),
        )
        return notices + moved[-1:]

    async def _detect_engine(self, model: str) -> None:
        """The engine from the model list's ``owned_by`` (vLLM's ``vllm``, llama.cpp's
        ``llamacpp``, llama-cpp-python's ``me``...), once; unknown when it says nothing
        ollm knows or the list cannot be read."""
        if self._engine_known:
            return
        self._engine_known = True
        await self._card(model)
        snapshot = self._models
        owners = [card.owned_by for card in snapshot[1].values()] if snapshot else []
        card = snapshot[1].get(model) if snapshot else None
        if card is not None:
            owners.insert(0, card.owned_by)
        for owner in owners:
            engine = _OWNERS.get(owner or "")
            if engine is not None:
                self._engine = engine
                log.info("%s is %s (owned_by %r)", self.url, engine, owner)
                return

    def _dropped_notice(self, request: ProviderRequest) -> NoticeEvent | None:
        """Once: options of the request that the engine takes under no name."""
        engine = self._engine
        if self._dropped_noted or engine not in ("openai", "ollama"):
            return None
        options = request.options
        dropped = [
            name
            for name, value in (
                ("repeat_penalty", options.repeat_penalty),
                ("top_k", options.top_k),
            )
            if value is not None and (engine == "openai" or name == "repeat_penalty")
        ]
        if not dropped:
            return None
        self._dropped_noted = True
        who = "OpenAI's API" if engine == "openai" else "Ollama's /v1"
        instead = (
            "frequency_penalty or presence_penalty (GenerationOptions.extra) are its own"
            if engine == "openai"
            else "ollm chat -p ollama takes it"
        )
        return NoticeEvent(
            f"{who} takes no {' or '.join(dropped)}: not sent ({instead}).",
            "option_ignored",
        )

    def _adjust(
        self, request: ProviderRequest, *, stream: bool, moved: list[NoticeEvent]
    ) -> Adjust:
        """Drops or swaps an option a server refuses (learnt for the provider's life)."""

        def adjust(status: int, body: bytes) -> bool:
            if status not in (400, 422, 500):
                return False
            said = parse_error(status, body)
            # llama-cpp-python refuses json_schema with HTTP 500, llama.cpp with 500 or
            # 400; sent again at once with the next rung, no retry spent.
            notice = self._format_refused(request, said)
            if notice is not None:
                moved.append(notice)
                return True
            if status == 500:
                return False
            if stream and self._include_usage and said.mentions("stream_options"):
                log.info("%s refuses stream_options: no usage from it", self.url)
                self._include_usage = False
                return True
            field = self._max_tokens_field
            if request.options.max_tokens is not None and said.mentions(field):
                self._max_tokens_field = _OTHER_FIELD[field]
                log.info("%s refuses %s: sending %s", self.url, field, _OTHER_FIELD[field])
                return True
            return False

        return adjust

    def _format_refused(self, request: ProviderRequest, said: Refusal) -> NoticeEvent | None:
        """When ``said`` refuses the typed output's ``response_format``: the model's next
        rung of the ladder, remembered, and the notice that says so; else ``None``."""
        if request.response_format is None or not said.mentions(*_FORMAT_WORDS):
            return None
        model = request.model
        rung = self._format_rungs.get(model, "json_schema")
        sent = response_format_at(request.response_format, rung)
        if sent is None:
            return None  # nothing left to drop
        below: FormatRung = "json_object" if sent.get("type") == "json_schema" else "prompted"
        self._format_rungs[model] = below
        log.info("%s refuses response_format %s for %s", self.url, sent.get("type"), model)
        now = (
            "any JSON object (json_object) with the schema in the prompt"
            if below == "json_object"
            else "the value by the prompt alone (no response_format)"
        )
        return NoticeEvent(
            f"The server at {self.config.base_url} refused response_format "
            f"{sent.get('type')} for {model} ({quote(said.message)}); ollm asks it for "
            f"{now} from now on.",
            "format_fallback",
        )

    def error_for(
        self, status: int, body: bytes, headers: httpx.Headers, *, path: str, model: str | None
    ) -> OllmError:
        """The server's error reply as an ``OllmError`` (see the README's table)."""
        return error_from_reply(
            parse_error(status, body), config=self.config, path=path, model=model, headers=headers
        )

    async def available_models(self) -> list[str] | None:
        """The ids the server lists (``None`` when it cannot say)."""
        listing = await self._models_list(short=True)
        return [card.id for card in listing.data]

    async def _models_list(self, *, short: bool = False) -> ModelList:
        listing: ModelList = await self.call(
            "GET",
            "/models",
            ModelList,
            timeouts=self._short if short else None,
            retry=NO_RETRY if short else None,
        )
        self._models = (time.monotonic(), {c.id: c for c in listing.data})
        return listing

    def _replied(self, request: ProviderRequest, usage: Usage | None) -> None:
        """Note what the server counted for a complete reply."""
        if usage is not None:
            self._anchors.remember(request, usage.prompt_tokens)

    def _known_window(self, request: ProviderRequest) -> int | None:
        """The window of ``request``'s model as far as ollm knows it without asking: the
        request's, the configuration's, else the last model list's (``None``: unknown)."""
        window = request.options.context_window
        if isinstance(window, int):
            return window
        if self.config.context_window is not None:
            return self.config.context_window
        snapshot = self._models
        card = snapshot[1].get(request.model) if snapshot is not None else None
        return card.max_model_len or card.context_length if card is not None else None

    def _estimated_usage(self, request: ProviderRequest, characters: int) -> Usage:
        """ollm's own count for a reply the server sent no usage for (llama-cpp-python
        ignores ``stream_options.include_usage``): the prompt as ``count_tokens`` counts
        it, the reply's ``characters`` as ollm's fallback does (ceil of a quarter),
        marked ``estimated``."""
        prompt = self._anchors.count(request)
        completion = -(-characters // 4)  # ollm.estimate_text_tokens's rule, on a count
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            estimated=True,
        )

    def _window_notice(
        self, request: ProviderRequest, fingerprint: str | None
    ) -> NoticeEvent | None:
        """Once: the server is Ollama's /v1 (``fp_ollama``), which cannot set the context
        window a request asks for; ``-p ollama`` can."""
        if (
            fingerprint != "fp_ollama"
            or request.options.context_window is None
            or self._window_warned
        ):
            return None
        self._window_warned = True
        return NoticeEvent(
            f"The server at {self.config.base_url} is Ollama's OpenAI-compatible /v1, which "
            f"cannot set the context window asked for ({request.options.context_window} "
            "tokens): the model keeps the window it is loaded with, and Ollama may cut a "
            "longer prompt without saying so. Use Ollama's own API instead: ollm chat -p "
            "ollama (OLLAMA_HOST), which sets the window and guards against cut prompts.",
            "context_window_ignored",
        )

    # -- tokens and capabilities -------------------------------------------------------

    async def count_tokens(self, request: ProviderRequest) -> int:
        """The prompt tokens of ``request``, anchored on what the server last counted.

        When the history only grew since the server's last reply for this model, the
        estimate is that reply's ``prompt_tokens`` plus characters / 4 of the new
        messages; else characters / 4 of the whole request.
        """
        return self._anchors.count(request)

    async def model_capabilities(self, model: str) -> ModelCapabilities:
        """What the configuration says ``model`` supports; the window also from the server.

        Never fails for want of a server: what is not known is ``None``.
        """
        config = self.config
        window = config.context_window
        if window is None:
            card = await self._card(model)
            if card is not None:
                window = card.max_model_len or card.context_length
        return ModelCapabilities(
            tools=config.tools,
            vision=config.vision,
            thinking=config.thinking,
            context_window=window,
        )

    async def _card(self, model: str) -> ModelCard | None:
        snapshot = self._models
        if snapshot is None or time.monotonic() - snapshot[0] > MODELS_SECONDS:
            try:
                await self._models_list(short=True)
            except Exception:
                log.debug("the model list of %s is unknown", self.url, exc_info=True)
                return None
            snapshot = self._models
            assert snapshot is not None
        return snapshot[1].get(model)

    # -- models ------------------------------------------------------------------------

    async def list_models(self) -> list[ModelInfo]:
        """The models the server serves (``GET /models``), sorted by name."""
        listing = await self._models_list()
        return sorted((self._info(card) for card in listing.data), key=lambda m: m.name)

    async def show_model(self, name: str) -> ModelInfo:
        """One model as the server lists it; raises ``ModelNotFoundError`` when it has none."""
        listing = await self._models_list()
        for card in listing.data:
            if card.id == name:
                return self._info(card)
        names = [card.id for card in listing.data]
        shown = ", ".join(names[:12]) or "none"
        raise ModelNotFoundError(
            f"The server at {self.url} has no model {name!r}. It has: {shown}.",
            provider=PROVIDER,
            model=name,
        )

    def _info(self, card: ModelCard) -> ModelInfo:
        window = self.config.context_window or card.max_model_len or card.context_length
        details: dict[str, Any] = {}
        for key in ("owned_by", "root", "parent"):
            value = getattr(card, key)
            if value:
                details[key] = value
        return ModelInfo(
            name=card.id,
            modified_at=datetime.fromtimestamp(card.created, UTC) if card.created else None,
            capabilities=ModelCapabilities(
                tools=self.config.tools,
                vision=self.config.vision,
                thinking=self.config.thinking,
                context_window=window,
            ),
            details=details,
        )

    # -- embeddings and health ---------------------------------------------------------

    async def embed(
        self, model: str, texts: Sequence[str], *, dimensions: int | None = None
    ) -> EmbeddingResult:
        """One vector per text, in order, in batches of ``embed_batch_size``."""
        if isinstance(texts, str):
            raise InvalidRequestError("embed() takes a list of texts, not one string.")
        items = list(texts)
        if not all(isinstance(text, str) for text in items):
            raise InvalidRequestError("embed() takes a list of strings.")
        vectors: list[list[float]] = []
        prompt = 0
        size = max(1, self.embed_batch_size)
        for start in range(0, len(items), size):
            batch = items[start : start + size]
            payload: dict[str, Any] = {"model": model, "input": batch, "encoding_format": "float"}
            if dimensions is not None:
                payload["dimensions"] = dimensions
            result: EmbeddingList = await self.call(
                "POST", "/embeddings", EmbeddingList, json=payload, model=model
            )
            ordered = sorted(result.data, key=lambda item: item.index)
            if len(ordered) != len(batch):
                raise BadResponseError(
                    f"The server at {self.url} returned {len(ordered)} vectors for "
                    f"{len(batch)} texts. Check that {model!r} is an embedding model.",
                    provider=PROVIDER,
                    model=model,
                )
            vectors.extend(item.embedding for item in ordered)
            usage = usage_from(result.usage)
            if usage is not None:
                prompt += usage.prompt_tokens
        usage_total = Usage(prompt_tokens=prompt, total_tokens=prompt) if prompt else None
        return EmbeddingResult(model=model, vectors=vectors, usage=usage_total)

    async def health(self) -> HealthStatus:
        """Whether the server answers ``GET /models``, and how fast. Never raises."""

        async def probe() -> None:
            await self._models_list(short=True)

        return await check_health(self.name, probe, self.url)
