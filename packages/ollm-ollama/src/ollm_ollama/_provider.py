"""``OllamaProvider``: chat, tools, model management and embeddings on an Ollama server."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence

import httpx

from ollm import __version__ as ollm_version
from ollm.errors import ModelNotFoundError, OllmError
from ollm.kit import UsageAnchors
from ollm.types import (
    AbortSignal,
    EmbeddingResult,
    HealthStatus,
    ModelCapabilities,
    ModelInfo,
    NoticeEvent,
    ProviderEvent,
    ProviderRequest,
    PullProgress,
    RunningModel,
)
from ollm_http import (
    NO_RETRY,
    ErrorContext,
    HTTPProvider,
    Limits,
    RetryPolicy,
    Timeouts,
    check_health,
)
from ollm_ollama import _models
from ollm_ollama._chat import stream_chat
from ollm_ollama._config import (
    ENV_CONNECT_TIMEOUT,
    ENV_HOST,
    ENV_TIMEOUT,
    KeepAlive,
    OllamaConfig,
)
from ollm_ollama._convert import capabilities_from
from ollm_ollama._embed import DEFAULT_BATCH_SIZE, embed
from ollm_ollama._errors import PROVIDER, error_from_status
from ollm_ollama._guard import TruncationGuard
from ollm_ollama._version import __version__
from ollm_ollama._wire import MAX_LINE_BYTES, ShowResponse

__all__ = ["OllamaProvider"]

log = logging.getLogger(__name__)

# Ollama unloads an idle model after 5 minutes by default (keep_alive): a model that
# answered within the last 4 is taken to be loaded still, without asking.
RECENTLY_LOADED_SECONDS = 240.0
RUNNING_LIST_SECONDS = 2.0

CONTEXT = ErrorContext(
    provider="Ollama",
    code_name=PROVIDER,
    url_setting=ENV_HOST,
    start_hint=(
        "Start it with: ollama serve (install it from https://ollama.com/download first). "
        "No Ollama here? ollm chat -p echo answers with no server at all, and -p openai "
        "reaches any OpenAI-compatible server."
    ),
    timeout_setting=ENV_TIMEOUT,
    connect_timeout_setting=ENV_CONNECT_TIMEOUT,
    read_timeout_hint=(
        "loading a large model for the first time can take minutes: raise the timeout "
        f"({ENV_TIMEOUT}=600)"
    ),
)


class OllamaProvider(HTTPProvider):
    """The Ollama provider: ``ChatClient(provider=OllamaProvider())``, or on its own.

    Configuration comes from the arguments, else from ``environ`` (``os.environ`` by
    default, read here): ``OLLAMA_HOST`` (read like the official client does, with
    ``0.0.0.0`` and ``::`` meaning this machine), ``OLLM_OLLAMA_TIMEOUT`` (seconds to
    wait for the server's next bytes; 300 by default, because a cold model load is
    slow), ``OLLM_OLLAMA_CONNECT_TIMEOUT`` (5 by default), and ``OLLAMA_API_KEY``
    (sent as a bearer token). ``keep_alive`` is how long the server keeps a model
    loaded after a request (seconds, or a duration such as ``"10m"``). ``http`` picks
    what carries the requests to an ``http://`` server with no proxy in the way:
    ``"builtin"`` (the default; ollm's own HTTP/1.1 transport, several times faster on
    a stream) or ``"httpx"`` (httpx's own stack, which ``https://`` and proxied servers
    always use); ``OLLM_OLLAMA_HTTP`` sets it too. ``affinity_header`` (or
    ``OLLM_OLLAMA_AFFINITY_HEADER``) names a header that carries each chat's
    conversation id, for a proxy that keeps a conversation on one host.
    ``transport`` replaces the network (an ``httpx`` transport, for tests and
    benchmarks).

    The provider keeps one connection pool, opened on first use; close it with
    ``await provider.aclose()`` or ``async with OllamaProvider() as provider``.
    """

    name = "ollama"
    handles_abort = True
    embed_batch_size = DEFAULT_BATCH_SIZE
    wire = "Ollama's documented format"

    def __init__(
        self,
        host: str | None = None,
        *,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        keep_alive: KeepAlive | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        http: str | None = None,
        retry: RetryPolicy | None = None,
        affinity_header: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = OllamaConfig.resolve(
            host,
            timeout=timeout,
            connect_timeout=connect_timeout,
            keep_alive=keep_alive,
            headers=headers,
            http=http,
            affinity_header=affinity_header,
            environ=os.environ if environ is None else environ,
        )
        config = self.config
        super().__init__(
            config.http_config(
                agent=f"ollm/{ollm_version} ollm-ollama/{__version__}",
                context=CONTEXT,
                headers={
                    "Content-Type": "application/json",
                    **({"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}),
                },
                limits=Limits(max_line=MAX_LINE_BYTES),
            ),
            stack=config.http,
            transport=transport,
            retry=retry,
        )
        self.short_timeouts = Timeouts.quick(config.connect_timeout)
        self._shows: dict[str, ShowResponse] = {}
        self._answered: dict[str, float] = {}
        self._noticed: dict[str, float] = {}
        self._anchors = UsageAnchors()
        self._running: tuple[float, dict[str, RunningModel]] | None = None

    @property
    def host(self) -> str:
        """The server's base URL, for example ``http://127.0.0.1:11434``."""
        return self.config.host

    def error_for(
        self, status: int, body: bytes, headers: httpx.Headers, *, path: str, model: str | None
    ) -> OllmError:
        """Ollama's error reply as an ``OllmError`` (see the README's table)."""
        return error_from_status(
            status, body, config=self.config, path=path, model=model, headers=headers
        )

    # -- chat --------------------------------------------------------------------------

    def chat_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the reply to ``request``: text, thinking, tool calls, then the finish."""
        return stream_chat(self, request)

    async def _loading_notice(self, model: str, abort: AbortSignal) -> NoticeEvent | None:
        """A notice when ``model`` is about to be loaded into memory (never raises)."""
        now = time.monotonic()
        for seen in (self._answered.get(model), self._noticed.get(model)):
            # Recently answered, or already announced (a refused request loads nothing,
            # and the chat's next request should not announce the same load again).
            if seen is not None and now - seen < RECENTLY_LOADED_SECONDS:
                return None
        try:
            with abort.guard() as scope:
                if await self._loaded(model) is not None:
                    self._answered[model] = time.monotonic()
                    return None
                # Only a model the server has is loaded; a missing one fails right after.
                await self._show(model, quick=True)
            if scope.cancelled_caught:
                return None
        except Exception:
            log.debug("could not tell whether %r is loaded", model, exc_info=True)
            return None
        self._noticed[model] = now
        return NoticeEvent(
            f"Loading {model} into memory; the first reply can take a while.", "loading_model"
        )

    async def _model_stop(self, model: str, abort: AbortSignal) -> list[str]:
        """The model's own stop strings, to keep them when a request adds its own."""
        try:
            with abort.guard():
                return _models.model_stop(await self._show(model, quick=True))
        except Exception:
            log.debug("the stop strings of %r are unknown", model, exc_info=True)
        return []

    def _truncation_guard(self, request: ProviderRequest) -> TruncationGuard:
        """What the guard needs to tell a cut prompt: ollm's count of it, and the window
        (the ``num_ctx`` asked for and the trained length that caps it, else the window
        ``/api/ps`` last showed), as far as they are known without asking the server."""
        model = request.model
        asked = request.options.context_window
        trained = loaded = None
        if asked is not None:
            # Only what is known already (the loading notice's look): no request more.
            show = self._shows.get(model)
            trained = _models.trained_context_length(show) if show is not None else None
        elif self._running is not None:
            running = self._running[1].get(_models.canonical_name(model))
            loaded = running.context_window if running is not None else None
        return TruncationGuard(model, self._anchors.count(request), asked, trained, loaded)

    async def _learn_window(self, guard: TruncationGuard, abort: AbortSignal) -> TruncationGuard:
        """``guard`` with the window the server loaded the model with for this reply
        (``/api/ps``, asked once the reply is done), when it was unknown before, and the
        model's trained length (known already: the loading notice's look), the bound of
        any window when the server cannot say (never raises)."""
        self._running = None  # the reply loaded the model: the list changed
        running = None  # (also when the chat is aborted meanwhile)
        try:
            with abort.guard():
                running = await self._loaded(guard.model)
        except Exception:
            log.debug("the window %r is loaded with is unknown", guard.model, exc_info=True)
        show = self._shows.get(guard.model)
        trained = _models.trained_context_length(show) if show is not None else None
        loaded = running.context_window if running is not None else None
        return dataclasses.replace(guard, trained=trained, loaded=loaded)

    def _streaming(self, model: str) -> None:
        """The server began a reply: the model is in memory now (no loading notice)."""
        self._answered[model] = time.monotonic()
        self._running = None

    def _replied(self, request: ProviderRequest, prompt_tokens: int | None) -> None:
        """Note a complete reply: the model is loaded, and what its prompt counted."""
        self._answered[request.model] = time.monotonic()
        self._running = None  # the server loaded the model: the list changed
        self._anchors.remember(request, prompt_tokens)

    # -- tokens and capabilities -------------------------------------------------------

    async def count_tokens(self, request: ProviderRequest) -> int:
        """The prompt tokens of ``request``, anchored on what the server last counted.

        When the history only grew since the server's last answer for this model (same
        system prompt and tools, earlier messages unchanged), the estimate is that
        answer's ``prompt_eval_count`` plus characters / 4 of the new messages; else it
        is characters / 4 of the whole request.
        """
        return self._anchors.count(request)

    async def model_capabilities(self, model: str) -> ModelCapabilities:
        """What ``model`` supports, and the context window the server will really use.

        The window is the loaded model's (``/api/ps``), else the Modelfile's
        ``num_ctx``, else ``None`` (unknown: the runtime assumes 4096); the longest
        window is the trained length (``/api/show``). Raises
        ``ModelNotFoundError`` when the server does not have the model.
        """
        show = await self._show(model, quick=True)
        try:
            loaded = await self._loaded(model)
        except OllmError:
            loaded = None
        window = loaded.context_window if loaded is not None else None
        if window is None:
            window = _models.modelfile_num_ctx(show)
        return capabilities_from(show.capabilities, window, _models.trained_context_length(show))

    async def _loaded(self, model: str) -> RunningModel | None:
        """``model`` as ``/api/ps`` lists it, or ``None`` when it is not in memory.

        The list is reused for a moment, so that the runtime's look at the model's
        capabilities and the chat right after it ask the server once.
        """
        snapshot = self._running
        if snapshot is None or time.monotonic() - snapshot[0] > RUNNING_LIST_SECONDS:
            self._remember_running(
                await _models.running_models(self, timeouts=self.short_timeouts, retry=NO_RETRY)
            )
            snapshot = self._running
            assert snapshot is not None
        return snapshot[1].get(_models.canonical_name(model))

    def _remember_running(self, running: list[RunningModel]) -> list[RunningModel]:
        self._running = (
            time.monotonic(),
            {_models.canonical_name(m.name): m for m in running},
        )
        return running

    async def _show(self, model: str, *, quick: bool = False) -> ShowResponse:
        """``/api/show`` of ``model``, cached; ``quick`` for a best-effort look (short
        timeouts, no retry: the chat goes on without it)."""
        show = self._shows.get(model)
        if show is None:
            show = await _models.fetch_show(
                self,
                _models.check_name(model),
                timeouts=self.short_timeouts if quick else None,
                retry=NO_RETRY if quick else None,
            )
            self._shows[model] = show
        return show

    def _forget(self, model: str) -> None:
        """Drop what is cached about ``model`` (after a pull or a delete)."""
        self._running = None
        wanted = _models.canonical_name(model)
        self._anchors.forget(lambda name: _models.canonical_name(name) == wanted)
        for cache in (self._shows, self._answered, self._noticed):
            for key in [k for k in cache if _models.canonical_name(k) == wanted]:
                del cache[key]

    # -- model management --------------------------------------------------------------

    async def list_models(self) -> list[ModelInfo]:
        """The models on the server (``ollama list``)."""
        return await _models.list_models(self)

    async def show_model(self, name: str) -> ModelInfo:
        """One model in detail; raises ``ModelNotFoundError`` when it is missing."""
        show = await _models.fetch_show(self, _models.check_name(name))
        self._shows[name] = show
        return _models.model_info_from_show(name, show)

    def stream_pull(self, name: str) -> AsyncGenerator[PullProgress, None]:
        """Download ``name``, yielding each step; raises a typed error if it fails."""
        name = _models.check_name(name)
        self._forget(name)
        return _models.stream_pull(self, name, self.http.config.timeouts)

    async def pull_model(
        self, name: str, *, on_progress: Callable[[PullProgress], object] | None = None
    ) -> None:
        """Download ``name``, calling ``on_progress`` (sync or async) at every step."""
        async with contextlib.aclosing(self.stream_pull(name)) as steps:
            async for progress in steps:
                if on_progress is not None:
                    result = on_progress(progress)
                    if inspect.isawaitable(result):
                        await result

    async def delete_model(self, name: str) -> None:
        """Delete ``name``; raises ``ModelNotFoundError`` when it is missing."""
        name = _models.check_name(name)
        try:
            await _models.delete_model(self, name)
        except ModelNotFoundError as exc:
            raise ModelNotFoundError(
                f"Model {name!r} is not on the Ollama server at {self.host}, so there is "
                "nothing to delete. See what is there with: ollm models list",
                provider=self.name,
                model=name,
                status=exc.status,
            ) from None
        finally:
            self._forget(name)

    async def copy_model(self, source: str, destination: str) -> None:
        """Copy ``source`` to the new name ``destination`` (``ollama cp``)."""
        await _models.copy_model(
            self,
            _models.check_name(source, "source model"),
            _models.check_name(destination, "destination model"),
        )
        self._forget(destination)

    async def running_models(self) -> list[RunningModel]:
        """The models loaded in memory now (``ollama ps``), latest to expire first."""
        return self._remember_running(await _models.running_models(self))

    async def version(self) -> str:
        """The server's version, for example ``"0.12.10"``."""
        return await _models.server_version(self)

    # -- embeddings and health ---------------------------------------------------------

    async def embed(
        self,
        model: str,
        texts: Sequence[str],
        *,
        dimensions: int | None = None,
        truncate: bool | None = None,
    ) -> EmbeddingResult:
        """One vector per text, in order (batched for large inputs).

        ``dimensions`` shortens the vectors (servers since v0.11.11); ``truncate=False``
        makes a text longer than the context an error instead of cutting it.
        """
        return await embed(
            self,
            _models.check_name(model),
            texts,
            batch_size=self.embed_batch_size,
            dimensions=dimensions,
            truncate=truncate,
            keep_alive=self.config.keep_alive,
        )

    async def health(self) -> HealthStatus:
        """Whether the server answers, how fast, and its version. Never raises."""
        return await check_health(
            self.name,
            lambda: _models.server_version(self, timeouts=self.short_timeouts, retry=NO_RETRY),
            f"Ollama at {self.host}",
        )
