"""The ASGI application: routes, keys, CORS, limits, and each request's life.

Plain ASGI callables, no framework: uvicorn (or httpx's ``ASGITransport`` in tests)
calls ``ServeApp`` once per request. Every refusal is the wire's own error shape with
the right status; nothing reaches a provider before the key and the body are checked.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec

import ollm
from ollm.kit import nests_deeper_than
from ollm_serve import _ollama, _openai
from ollm_serve._backend import Backend, Delta, Done, Failed
from ollm_serve._errors import Refused

__all__ = ["ServeApp", "ServeSettings", "create_app"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

log = logging.getLogger(__name__)

MAX_BODY = 8 * 1024 * 1024
MAX_DEPTH = 64


@dataclass(frozen=True)
class ServeSettings:
    """How the server guards itself (the command line fills it; tests build it)."""

    api_keys: tuple[str, ...] = ()
    cors: tuple[str, ...] = ()
    max_body: int = MAX_BODY
    max_depth: int = MAX_DEPTH
    max_concurrent: int = 64
    # Seconds a client is told to wait when the server is full.
    retry_after: int = 1
    extra_headers: Sequence[tuple[bytes, bytes]] = field(default_factory=tuple)


class _Disconnected(Exception):
    """The client went away."""


class ServeApp:
    """``ollm serve``'s ASGI app over ``backend``."""

    def __init__(self, backend: Backend, settings: ServeSettings | None = None) -> None:
        self.backend = backend
        self.settings = settings or ServeSettings()
        self.active = 0
        self.draining = False
        self._keys = tuple(k.encode() for k in self.settings.api_keys)
        self._routes: dict[tuple[str, str], Callable[..., Awaitable[None]]] = {
            ("POST", "/v1/chat/completions"): self._openai_chat,
            ("GET", "/v1/models"): self._openai_models,
            ("POST", "/v1/embeddings"): self._openai_embeddings,
            ("POST", "/api/chat"): self._ollama_chat,
            ("GET", "/api/tags"): self._ollama_tags,
            ("POST", "/api/show"): self._ollama_show,
            ("POST", "/api/embed"): self._ollama_embed,
            ("GET", "/api/version"): self._ollama_version,
            ("GET", "/"): self._root,
            ("HEAD", "/"): self._root,
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        method: str = scope["method"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        cors = self._cors(headers.get("origin"))
        openai = not path.startswith("/api/")
        reply = _Reply(send, cors + list(self.settings.extra_headers), openai)
        if method == "OPTIONS":
            await reply.preflight(bool(cors))
            return
        try:
            self._check_key(headers)
            route = self._routes.get((method, path))
            if route is None:
                known = any(p == path for _, p in self._routes)
                if known:
                    raise Refused(
                        405, f"{method} is not allowed on {path}.", code="method_not_allowed"
                    )
                raise Refused(
                    404,
                    f"No endpoint at {path}. ollm serve has /v1/chat/completions, /v1/models, "
                    "/v1/embeddings and Ollama's /api/chat, /api/tags, /api/show, "
                    "/api/embed, /api/version.",
                    code="not_found",
                )
            if method == "POST":
                body = await self._body(receive, headers)
                with _client_trace(headers):
                    await self._limited(route, body, reply, receive)
            else:
                await route(reply)
        except Refused as refused:
            await reply.refuse(refused)
        except _Disconnected:
            return

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.draining = True
                await self.backend.registries.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- guards ---------------------------------------------------------------------

    def _check_key(self, headers: dict[str, str]) -> None:
        if not self._keys:
            return
        given = headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        token_bytes = token.strip().encode("latin-1") if scheme.lower() == "bearer" else b""
        # Every key is compared, in constant time, so the time taken tells nothing.
        match = False
        for key in self._keys:
            match |= hmac.compare_digest(token_bytes, key)
        if not match:
            raise Refused(
                401,
                "Missing or wrong API key: send the header 'Authorization: Bearer KEY' with "
                "a key given to ollm serve (--api-key or OLLM_SERVE_API_KEYS).",
                code="invalid_api_key",
            )

    def _cors(self, origin: str | None) -> list[tuple[bytes, bytes]]:
        allowed = self.settings.cors
        if not allowed or origin is None or ("*" not in allowed and origin not in allowed):
            return []
        return [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"vary", b"Origin"),
        ]

    async def _body(self, receive: Receive, headers: dict[str, str]) -> Any:
        limit = self.settings.max_body
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise Refused(
                413, f"The request body is larger than {limit} bytes.", code="body_too_large"
            )
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise Refused(
                    413, f"The request body is larger than {limit} bytes.", code="body_too_large"
                )
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        try:
            body = msgspec.json.decode(b"".join(chunks))
        except msgspec.DecodeError as exc:
            raise Refused(400, f"The body is not valid JSON: {exc}.", code="invalid_json") from None
        except RecursionError:
            # msgspec gives up near 1,000 levels: far past the limit below.
            body = None
        if body is None or nests_deeper_than(body, self.settings.max_depth):
            raise Refused(
                400,
                f"The body nests deeper than {self.settings.max_depth} levels.",
                code="too_deep",
            )
        if not isinstance(body, dict):
            raise Refused(400, "The body must be a JSON object.", code="invalid_json")
        return body

    async def _limited(
        self, route: Callable[..., Awaitable[None]], body: Any, reply: _Reply, receive: Receive
    ) -> None:
        """Run ``route`` within the cap on concurrent requests, aborting the upstream
        request when the client disconnects."""
        if self.draining:
            raise Refused(
                503,
                "The server is shutting down. Retry on another server.",
                code="shutting_down",
                retry_after=self.settings.retry_after,
            )
        if self.active >= self.settings.max_concurrent:
            raise Refused(
                429,
                f"The server is busy ({self.settings.max_concurrent} requests at once). "
                f"Retry after {self.settings.retry_after} s.",
                code="too_many_requests",
                retry_after=self.settings.retry_after,
            )
        self.active += 1
        abort = ollm.AbortSignal()
        refused: Refused | None = None
        try:
            async with anyio.create_task_group() as group:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    # The client left: the provider closes its stream (the server stops
                    # generating), and nothing more is sent.
                    abort.abort("the client disconnected")
                    group.cancel_scope.cancel()

                group.start_soon(watch)
                try:
                    await route(body, reply, abort)
                except Refused as exc:
                    refused = exc
                except Exception as exc:
                    log.exception("ollm serve failed on a request")
                    refused = Refused(
                        500,
                        f"ollm serve failed: {type(exc).__name__}: {exc}. Please report it.",
                        code="internal_error",
                    )
                group.cancel_scope.cancel()
        finally:
            self.active -= 1
        if refused is not None:
            raise refused

    # -- OpenAI ---------------------------------------------------------------------

    async def _openai_chat(self, body: Any, reply: _Reply, abort: ollm.AbortSignal) -> None:
        job, stream, include_usage = _openai.read_chat(body)
        ident = _openai.new_id()
        # Closed as soon as the route is done with it, whole replies too: the chat
        # settles (its stream, its connection, its log) now, not when collected.
        async with contextlib.aclosing(self.backend.chat(job, abort)) as events:
            if not stream:
                content, thinking, end = await _whole(events)
                await reply.json(200, _openai.completion(ident, job.model, content, thinking, end))
                return
            created = int(time.time())
            first = await anext(events)
            if isinstance(first, Failed):
                # Nothing sent yet: a proper error status.
                raise _refused(first)
            await reply.start(200, b"text/event-stream", stream=True)
            await reply.body(
                _openai.chunk(ident, created, job.model, {"role": "assistant", "content": ""})
            )
            async for event in _prepend(first, events):
                if isinstance(event, Delta):
                    delta = (
                        {"content": event.text}
                        if event.text
                        else {"reasoning_content": event.thinking}
                    )
                    await reply.body(_openai.chunk(ident, created, job.model, delta))
                elif isinstance(event, Failed):
                    error = _openai.error_body(_refused(event))
                    await reply.body(b"data: " + error + b"\n\n")
                elif isinstance(event, Done):
                    if event.content is not None:
                        await reply.body(
                            _openai.chunk(ident, created, job.model, {"content": event.content})
                        )
                    if event.tool_calls:
                        calls = _openai.tool_calls_body(event.tool_calls, indexed=True)
                        await reply.body(
                            _openai.chunk(ident, created, job.model, {"tool_calls": calls})
                        )
                    await reply.body(_openai.chunk(ident, created, job.model, {}, event.reason))
                    if include_usage:
                        await reply.body(
                            _openai.chunk(ident, created, job.model, None, usage=event.usage)
                        )
            await reply.body(b"data: [DONE]\n\n", more=False)

    async def _openai_models(self, reply: _Reply) -> None:
        names = await self._model_names()
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "ollm"} for name, _ in names
        ]
        await reply.json(200, msgspec.json.encode({"object": "list", "data": data}))

    async def _openai_embeddings(self, body: Any, reply: _Reply, abort: ollm.AbortSignal) -> None:
        model, texts, as_base64 = _openai.read_embeddings(body)
        result = await self._embed(model, texts)
        data = [
            {"object": "embedding", "index": i, "embedding": _openai.vector(v, as_base64)}
            for i, v in enumerate(result.vectors)
        ]
        usage = result.usage or ollm.Usage()
        await reply.json(
            200,
            msgspec.json.encode(
                {
                    "object": "list",
                    "data": data,
                    "model": model,
                    "usage": {
                        "prompt_tokens": usage.prompt_tokens,
                        "total_tokens": usage.prompt_tokens,
                    },
                }
            ),
        )

    # -- Ollama ---------------------------------------------------------------------

    async def _ollama_chat(self, body: Any, reply: _Reply, abort: ollm.AbortSignal) -> None:
        job, stream = _ollama.read_chat(body)
        started = time.perf_counter()
        # Closed as soon as the route is done with it, whole replies too: the chat
        # settles (its stream, its connection, its log) now, not when collected.
        async with contextlib.aclosing(self.backend.chat(job, abort)) as events:
            if not stream:
                content, thinking, end = await _whole(events)
                await reply.json(
                    200, _ollama.final_chunk(job.model, end, started, content, thinking)
                )
                return
            first = await anext(events)
            if isinstance(first, Failed):
                raise _refused(first)
            await reply.start(200, b"application/x-ndjson", stream=True)
            async for event in _prepend(first, events):
                if isinstance(event, Delta):
                    await reply.body(_ollama.chat_chunk(job.model, event.text, event.thinking))
                elif isinstance(event, Failed):
                    await reply.body(_ollama.error_body(_refused(event)) + b"\n")
                elif isinstance(event, Done):
                    await reply.body(
                        _ollama.final_chunk(job.model, event, started, event.content or "")
                    )
            await reply.body(b"", more=False)

    async def _ollama_tags(self, reply: _Reply) -> None:
        names = await self._model_names()
        models = [_ollama.model_entry(info, name) for name, info in names]
        await reply.json(200, msgspec.json.encode({"models": models}))

    async def _ollama_show(self, body: Any, reply: _Reply, abort: ollm.AbortSignal) -> None:
        model = body.get("model") or body.get("name")
        if not isinstance(model, str) or not model:
            raise Refused(400, "model is required")
        route = self.backend.route(model)
        provider = self.backend.provider(route)
        info = ollm.ModelInfo(name=route.model or model)
        show = getattr(provider, "show_model", None)
        if show is not None and route.model:
            info = await _guarded(show(route.model))
        capabilities = ["completion"]
        caps = info.capabilities
        if caps is None and route.model and hasattr(provider, "model_capabilities"):
            caps = await _guarded(provider.model_capabilities(route.model))
        if caps is not None:
            capabilities += [
                k for k in ("tools", "vision", "thinking", "embedding") if getattr(caps, k)
            ]
        if "tools" not in capabilities:
            # ollm recovers the calls of a model without native tools (ReAct, text calls).
            capabilities.append("tools")
        await reply.json(
            200,
            msgspec.json.encode(
                {
                    "modelfile": "",
                    "parameters": "\n".join(f"{k} {v}" for k, v in info.parameters.items()),
                    "template": "",
                    "details": _ollama.details(info),
                    "model_info": {},
                    "capabilities": capabilities,
                }
            ),
        )

    async def _ollama_embed(self, body: Any, reply: _Reply, abort: ollm.AbortSignal) -> None:
        model, texts = _ollama.read_embed(body)
        result = await self._embed(model, texts)
        usage = result.usage or ollm.Usage()
        await reply.json(
            200,
            msgspec.json.encode(
                {
                    "model": model,
                    "embeddings": result.vectors,
                    "prompt_eval_count": usage.prompt_tokens,
                }
            ),
        )

    async def _ollama_version(self, reply: _Reply) -> None:
        await reply.json(200, msgspec.json.encode({"version": _ollama.VERSION}))

    async def _root(self, reply: _Reply) -> None:
        # Ollama's own answer: clients probe it to see that a server is there.
        await reply.start(200, b"text/plain; charset=utf-8", length=17)
        await reply.body(b"Ollama is running", more=False)

    # -- shared ---------------------------------------------------------------------

    async def _model_names(self) -> list[tuple[str, ollm.ModelInfo]]:
        backend = self.backend
        providers = backend.providers or (None,)
        prefix = len(providers) > 1
        names: list[tuple[str, ollm.ModelInfo]] = []
        for name in providers:
            provider = backend.provider(backend.route(f"{name}:x" if name else ""))
            lister = getattr(provider, "list_models", None)
            found: list[ollm.ModelInfo] = []
            if lister is not None:
                try:
                    found = list(await lister())
                except ollm.OllmError as exc:
                    log.warning("listing the models of %s failed: %s", name, exc.message)
            if not found and backend.model:
                found = [ollm.ModelInfo(name=backend.model)]
            for info in found:
                names.append((f"{name}:{info.name}" if prefix else info.name, info))
        return names

    async def _embed(self, model: str, texts: list[str]) -> ollm.EmbeddingResult:
        route = self.backend.route(model)
        provider = self.backend.provider(route)
        embed = getattr(provider, "embed", None)
        if embed is None:
            raise Refused(
                400,
                f"The provider {provider.name!r} has no embeddings. Serve one that has "
                "(ollama, openai, gemini).",
                code="unsupported",
            )
        result: ollm.EmbeddingResult = await _guarded(embed(route.model or model, texts))
        return result


def create_app(
    providers: Sequence[str] = (),
    *,
    model: str | None = None,
    registries: ollm.Registries | None = None,
    tool_strategy: str = "auto",
    middleware: Sequence[str] = (),
    settings: ServeSettings | None = None,
    log: bool = False,
) -> ServeApp:
    """The ASGI app serving ``providers`` (names as ``-p`` takes them; none: the default
    provider). ``model`` is the model of a request that names only its provider; with
    ``log``, every chat served goes to the conversation log (``ollm logs``)."""
    backend = Backend(
        providers,
        model=model,
        registries=registries,
        tool_strategy=tool_strategy,
        middleware=middleware,
        log=log,
    )
    return ServeApp(backend, settings)


@contextlib.contextmanager
def _client_trace(headers: Mapping[str, str]) -> Iterator[None]:
    """The client's trace (W3C ``traceparent``, ``tracestate``) made current while its
    request runs, so that the ``otel`` middleware's spans join it: a served request is
    one trace with its caller. Nothing without the header, or without OpenTelemetry
    (installed with ollm-otel; ollm serve does not need it)."""
    if "traceparent" not in headers:
        yield
        return
    try:
        from opentelemetry import context, propagate
    except ImportError:
        yield
        return
    token = context.attach(propagate.extract(headers))
    try:
        yield
    finally:
        context.detach(token)


async def _guarded(call: Awaitable[Any]) -> Any:
    try:
        return await call
    except ollm.OllmError as exc:
        from ollm_serve._backend import status_of

        raise Refused(status_of(exc.code), exc.message, code=exc.code) from None


def _refused(failed: Failed) -> Refused:
    return Refused(failed.status, failed.message, code=failed.code, retry_after=failed.retry_after)


async def _whole(events: AsyncIterator[object]) -> tuple[str, str, Done]:
    """The whole reply of a chat that does not stream: text, reasoning, its end."""
    text: list[str] = []
    thinking: list[str] = []
    async for event in events:
        if isinstance(event, Delta):
            text.append(event.text)
            thinking.append(event.thinking)
        elif isinstance(event, Failed):
            raise _refused(event)
        elif isinstance(event, Done):
            content = event.content if event.content is not None else "".join(text)
            return content, "".join(thinking), event
    raise Refused(500, "The chat ended without an answer. Please report it.", code="internal_error")


async def _prepend(first: object, rest: AsyncIterator[object]) -> AsyncIterator[object]:
    yield first
    async for event in rest:
        yield event


class _Reply:
    """What a route sends: a status, headers, a body in pieces."""

    def __init__(self, send: Send, headers: list[tuple[bytes, bytes]], openai: bool) -> None:
        self._send = send
        self._headers = headers
        self._openai = openai
        self.started = False

    async def start(
        self,
        status: int,
        content_type: bytes,
        *,
        length: int | None = None,
        stream: bool = False,
        extra: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        headers = [(b"content-type", content_type), *self._headers, *extra]
        if length is not None:
            headers.append((b"content-length", str(length).encode()))
        if stream:
            headers.append((b"cache-control", b"no-cache"))
            # Tells a reverse proxy (nginx) not to hold the stream back.
            headers.append((b"x-accel-buffering", b"no"))
        self.started = True
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def body(self, data: bytes, *, more: bool = True) -> None:
        await self._send({"type": "http.response.body", "body": data, "more_body": more})

    async def json(
        self, status: int, data: bytes, extra: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        await self.start(status, b"application/json", length=len(data), extra=extra)
        await self.body(data, more=False)

    async def refuse(self, refused: Refused) -> None:
        if self.started:
            # Too late for a status: the stream simply ends.
            await self.body(b"", more=False)
            return
        data = _openai.error_body(refused) if self._openai else _ollama.error_body(refused)
        extra = []
        if refused.retry_after is not None:
            extra.append((b"retry-after", str(max(1, round(refused.retry_after))).encode()))
        await self.json(refused.status, data, extra)

    async def preflight(self, allowed: bool) -> None:
        extra = []
        if allowed:
            extra = [
                (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
                (b"access-control-allow-headers", b"authorization, content-type"),
                (b"access-control-max-age", b"600"),
            ]
        await self.start(204 if allowed else 405, b"text/plain", length=0, extra=extra)
        await self.body(b"", more=False)
