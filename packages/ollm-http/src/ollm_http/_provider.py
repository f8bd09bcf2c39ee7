"""``HTTPProvider``: the skeleton of a provider whose model runs behind an HTTP server.

A provider subclasses it and keeps only its wire: how a request is built, how a frame
of the reply is decoded (inline in its own chat loop: the hot path gains no call per
chunk), and how its server's error replies read (``error_for``, the one hook). The
skeleton owns the rest, the same for every provider:

- the connection pool (``HTTPClient``), headers, timeouts and TLS from an ``HTTPConfig``;
- ``open``: a request whose error reply becomes ``error_for``'s ``OllmError``, tried again
  as the ``RetryPolicy`` says (rate limits and transient failures, ``Retry-After``
  honoured), a missing model's error listing the models the server has;
- ``call``: a request whose JSON answer (decompressed, any transport) is decoded into a
  type, a reply that is not that type a ``BAD_RESPONSE`` quoting it;
- ``stream``: a ``FrameStream`` for a chat loop, which opens the request under the abort
  signal, lets the signal shut the socket, splits the body into NDJSON lines or
  Server-Sent Events, ends a reply cut short with ``STREAM_INTERRUPTED``, maps any
  failure to the right event, and gives the connection back to the pool;
- ``repr`` and every message without credentials.

A chat loop on it::

    async def chat_stream(self, request):
        stream = self.stream(
            "sse", model=request.model, abort=request.abort, headers=request.headers
        )
        try:
            await stream.open("POST", "/chat", build=lambda: body(request))
            reads, frames = stream.reads, stream.frames
            while True:
                data = await reads()
                for event in frames(data):
                    ...  # decode the frame, yield TextEvent...; at the last one:
                    stream.done()
                    yield FinishEvent("stop")
                    return
                if data is None:
                    break
            yield stream.interrupted()
        except Exception as exc:
            yield stream.failure(exc)
        finally:
            await stream.aclose()
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Literal, Self

import anyio
import httpx
import msgspec

from ollm.errors import (
    BadResponseError,
    ErrorCode,
    InvalidRequestError,
    ModelNotFoundError,
    OllmError,
    ProviderError,
)
from ollm.kit import excerpt, quote
from ollm.types import AbortSignal, ErrorEvent, FinishEvent, ProviderEvent
from ollm_http._client import HTTPClient, Reply
from ollm_http._config import ErrorContext, HTTPConfig, Timeouts
from ollm_http._lines import EventSplitter, LineSplitter, ServerSentEvent
from ollm_http._retry import DEFAULT_RETRY, RetryPolicy
from ollm_http._settings import Stack, display_url
from ollm_http._stream import abort_shuts_socket, body_reader, drain, failure_event

__all__ = ["FrameStream", "Framing", "HTTPProvider", "decode_json"]

log = logging.getLogger("ollm_http")

Framing = Literal["ndjson", "sse"]
"""How a streamed reply is cut into frames: NDJSON lines, or Server-Sent Events."""

# Streams ask for no compression: a proxy that compresses holds frames back.
_STREAM_HEADERS: dict[Framing, dict[str, str]] = {
    "ndjson": {"Accept": "application/x-ndjson", "Accept-Encoding": "identity"},
    "sse": {"Accept": "text/event-stream", "Accept-Encoding": "identity"},
}
# How many models a MODEL_NOT_FOUND message names before "and N more".
_SHOWN_MODELS = 12
# Refusals that an ``adjust`` may fix by changing the request, at most this many times.
# (OpenAI's: stream_options, max_tokens, then two rungs of the typed output's ladder.)
_ADJUSTMENTS = 4
# Arguments of a provider's constructor that a table of settings cannot give.
_NOT_SETTINGS = frozenset({"self", "transport", "retry", "environ"})

Adjust = Callable[[int, bytes], bool]
"""Looks at a refusal (status, body) and changes what ``build`` makes; True to send again."""


def decode_json(content: bytes | str, kind: Any = Any) -> Any:
    """``content`` decoded as JSON (as ``kind`` if given), depth-safe.

    ``msgspec.DecodeError`` (``ValidationError`` for the wrong shape) for anything that is
    not; JSON nested deeper than msgspec goes (about 1,000 levels) is a ``DecodeError``
    too, never a ``RecursionError``.
    """
    try:
        return msgspec.json.decode(content, type=kind)
    except RecursionError:
        raise msgspec.DecodeError("JSON is nested too deeply") from None


class HTTPProvider:
    """The base of a provider that talks to a model server over HTTP.

    Subclass it, call ``super().__init__(HTTPConfig(...))``, and write ``chat_stream`` (on
    ``stream``) and ``error_for``; ``available_models`` lets a missing model's error name
    the ones the server has. ``wire`` names the server's format in messages ("the
    OpenAI format"). The provider is an async context manager that closes its pool.
    """

    name: str = "http"
    handles_abort: bool = True
    wire: str = "the server's documented format"

    def __init__(
        self,
        config: HTTPConfig,
        *,
        stack: Stack = "builtin",
        transport: httpx.AsyncBaseTransport | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.http = HTTPClient(config, stack=stack, transport=transport)
        self.retry = retry if retry is not None else DEFAULT_RETRY

    @property
    def url(self) -> str:
        """The server's base URL, as messages show it (never with credentials)."""
        return self.http.base_url

    @property
    def context(self) -> ErrorContext:
        """How failures are worded for this provider."""
        return self.http.config.context

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={display_url(self.url)!r})"

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Self:
        """The provider built from a table of settings (a pool member's, in a file).

        Each key is a keyword argument of the constructor (``host``, ``base_url``,
        ``timeout``...); one that is not, or that a file cannot give (``transport``,
        ``retry``, ``environ``), is an ``InvalidRequestError`` naming those it takes. A
        plugin's ``ProviderSpec(settings_factory=...)`` calls it.
        """
        import inspect

        taken = [
            name
            for name, parameter in inspect.signature(cls.__init__).parameters.items()
            if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
            and name not in _NOT_SETTINGS
        ]
        unknown = sorted(set(settings) - set(taken))
        if unknown:
            raise InvalidRequestError(
                f"The {cls.name} provider has no setting {', '.join(map(repr, unknown))}. "
                f"Its settings: {', '.join(taken)}."
            )
        return cls(**settings)

    # -- the hooks ---------------------------------------------------------------------

    def error_for(
        self, status: int, body: bytes, headers: httpx.Headers, *, path: str, model: str | None
    ) -> OllmError:
        """The ``OllmError`` for the server's error reply (status 400 or more).

        Override it with the server's own wording. Return ``RateLimitedError`` for a
        rate limit (it is waited for and tried again); the default words any status as
        a ``PROVIDER_ERROR`` quoting the body.
        """
        said = quote(body.decode("utf-8", "replace")) if body.strip() else "an empty reply"
        return ProviderError(
            f"{_capital(self.context.provider)} at {self.url} answered {path} with HTTP "
            f"{status}: {said}.",
            provider=self.context.code_name,
            model=model,
            status=status,
        )

    def precheck(self, method: str, path: str, *, model: str | None) -> OllmError | None:
        """An error to raise instead of sending a request that would certainly be refused
        (Gemini's API without a key); ``None`` (the default) sends it."""
        return None

    async def available_models(self) -> list[str] | None:
        """The models the server has, for a ``MODEL_NOT_FOUND`` message (``None``: unknown).

        Override it when the server can list them; it must not raise.
        """
        return None

    # -- requests ----------------------------------------------------------------------

    async def open(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        build: Callable[[], Any] | None = None,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        adjust: Adjust | None = None,
        retry: RetryPolicy | None = None,
    ) -> Reply:
        """Send a request and return its reply with the body unread (close it when done).

        The body is ``json``, or what ``build()`` makes for each attempt. An error reply
        raises ``error_for``'s error after the retries the policy allows (the
        provider's, or ``retry`` for this request: ``NO_RETRY`` for a health check);
        ``adjust`` may change what ``build`` makes after a refusal (an option the server
        does not take) and ask for the request to be sent again.
        """
        refused = self.precheck(method, path, model=model)
        if refused is not None:
            raise refused
        policy = retry if retry is not None else self.retry
        adjusted = 0
        number = 0
        while True:
            reply = await self.http.open(
                method,
                path,
                json=build() if build is not None else json,
                headers=headers,
                timeouts=timeouts,
                model=model,
            )
            if reply.status < 400:
                return reply
            body = await _error_body(reply)
            if adjust is not None and adjusted < _ADJUSTMENTS and adjust(reply.status, body):
                adjusted += 1
                continue
            error = self.error_for(reply.status, body, reply.headers, path=path, model=model)
            # The message quotes one line of the body; the whole is for --debug.
            log.debug(
                "%s answered %s %s with HTTP %s: %r", self.url, method, path, reply.status, body
            )
            wait = policy.wait(error, reply.status, number)
            if wait is None:
                if isinstance(error, ModelNotFoundError):
                    error = await self._with_models(error)
                raise error
            log.info("%s answered %s; trying again in %gs", self.url, reply.status, wait)
            await anyio.sleep(wait)
            number += 1

    async def _with_models(self, error: ModelNotFoundError) -> ModelNotFoundError:
        try:
            names = await self.available_models()
        except Exception:
            log.debug("listing the models for a message failed", exc_info=True)
            names = None
        if not names:
            return error
        shown = ", ".join(names[:_SHOWN_MODELS])
        more = f" and {len(names) - _SHOWN_MODELS} more" if len(names) > _SHOWN_MODELS else ""
        return ModelNotFoundError(
            f"{error.message} It has: {shown}{more}.",
            provider=error.provider,
            model=error.model,
            status=error.status,
        )

    async def call(
        self,
        method: str,
        path: str,
        kind: Any = Any,
        *,
        json: Any = None,
        model: str | None = None,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """A request and its JSON answer decoded as ``kind`` (``BAD_RESPONSE`` if it is not);
        ``kind=None`` reads and ignores the answer (routes that answer an empty body)."""
        reply = await self.open(
            method, path, json=json, model=model, timeouts=timeouts, retry=retry
        )
        try:
            content = await reply.aread()
        finally:
            await reply.aclose()
        if kind is None:
            return None
        return self.decode(content, kind, path)

    def decode(self, content: bytes, kind: Any, path: str) -> Any:
        """``content`` decoded as ``kind``, or ``BadResponseError`` quoting it."""
        try:
            return decode_json(content, kind)
        except msgspec.DecodeError as exc:
            raise BadResponseError(
                f"{_capital(self.context.provider)} at {self.url} answered "
                f"{path.partition('?')[0]} with "
                f"something that is not {self.wire} ({exc}): {excerpt(content)}. "
                f"{_check(self.context)}",
                provider=self.context.code_name,
            ) from None

    def stream(
        self,
        framing: Framing,
        *,
        model: str | None = None,
        abort: AbortSignal | None = None,
        affinity: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> FrameStream:
        """The ``FrameStream`` for one streamed reply (about ``model``, stopped by ``abort``).

        ``affinity`` is the request's affinity key (``request.conversation_id``): it goes
        in the configured ``affinity_header``, when there is one. ``headers`` are added to
        the request (a ``ProviderRequest``'s, such as a trace's ``traceparent``).
        """
        return FrameStream(
            self, framing, model=model, abort=abort, affinity=affinity, headers=headers
        )

    # -- lifetime ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the connection pool (a later request opens a new one)."""
        await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _check(context: ErrorContext) -> str:
    where = context.url_setting or "the address"
    return f"Check {where}: it must be {context.provider}'s address, not a proxy's page."


async def _error_body(reply: Reply) -> bytes:
    """An error reply's body (empty if it cannot be read); the reply is closed."""
    try:
        return await reply.aread()
    except OllmError:
        return b""
    finally:
        await reply.aclose()


class _Aborted(Exception):
    """The abort signal fired while the reply was read (ends the stream ``cancelled``)."""


class FrameStream:
    """One streamed reply, for a provider's chat loop (see ``HTTPProvider``).

    ``open`` sends the request, waiting for the reply's head under the abort signal;
    ``reads()`` is the next block of the body (``None`` at its end) and ``frames(data)``
    the NDJSON lines (``bytes``) or ``ServerSentEvent``s it completes (``frames(None)``:
    what the end of the body completes); both stop the stream, through ``failure``, once
    the signal fired. ``done()`` says the reply's last frame came, ``interrupted()`` is
    the event for a body that ended before it, ``failure(exc)`` the event for anything
    raised, and ``aclose()`` finishes: reads the body's end when it is done (the
    connection is used again), else closes the connection.
    """

    __slots__ = (
        "_finished",
        "_framing",
        "_headers",
        "_splitter",
        "_timeouts",
        "_unwatch",
        "abort",
        "frames",
        "model",
        "provider",
        "reads",
        "reply",
    )

    def __init__(
        self,
        provider: HTTPProvider,
        framing: Framing,
        *,
        model: str | None = None,
        abort: AbortSignal | None = None,
        affinity: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        # The stream's own headers win: what a middleware adds cannot change the framing.
        own = _STREAM_HEADERS[framing]
        self._headers = {**headers, **own} if headers else own
        header = provider.http.config.affinity_header
        if header is not None and affinity:
            self._headers = {**self._headers, header: _header_value(affinity)}
        self.abort = abort if abort is not None else AbortSignal()
        self._timeouts: Timeouts | None = None
        self.reply: Reply | None = None
        self.reads: Callable[[], Awaitable[bytes | None]] = _nothing
        self._framing = framing
        limit = provider.http.config.limits.max_line
        self._splitter = LineSplitter(limit) if framing == "ndjson" else EventSplitter(limit)
        self.frames: Callable[[bytes | None], list[Any]] = self._frames
        self._unwatch: Callable[[], None] | None = None
        self._finished = False

    @property
    def cancelled(self) -> bool:
        """Whether the abort signal fired."""
        return self.abort.aborted

    async def open(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        build: Callable[[], Any] | None = None,
        timeouts: Timeouts | None = None,
        adjust: Adjust | None = None,
    ) -> None:
        """Send the request (as ``HTTPProvider.open``) and start reading its reply."""
        abort = self.abort
        if abort.aborted:
            raise _Aborted
        self._timeouts = timeouts
        with abort.guard() as scope:
            self.reply = await self.provider.open(
                method,
                path,
                json=json,
                build=build,
                model=self.model,
                headers=self._headers,
                timeouts=timeouts,
                adjust=adjust,
            )
        if scope.cancelled_caught or self.reply is None:
            raise _Aborted
        response = self.reply.response
        self._unwatch = abort_shuts_socket(response, abort)
        self.reads = _reader(response, abort, guarded=self._unwatch is None)

    def _frames(self, data: bytes | None) -> list[Any]:
        if self.abort.aborted:
            raise _Aborted
        if data is not None:
            return self._splitter.feed(data)
        if isinstance(self._splitter, LineSplitter):
            last = self._splitter.end()
            return [last] if last is not None else []
        events: list[ServerSentEvent] = self._splitter.end()
        return events

    async def whole(self) -> bytes:
        """The whole body at once (a reply that is not streamed), read under the signal."""
        assert self.reply is not None, "open() first"
        with self.abort.guard() as scope:
            content = await self.reply.aread()
        if scope.cancelled_caught:
            raise _Aborted
        self._finished = True
        return content

    def done(self) -> None:
        """The reply's last frame came: the rest of the body is read when the stream closes."""
        self._finished = True

    def interrupted(self) -> ProviderEvent:
        """The event for a body that ended before its last frame (``cancelled`` if aborted)."""
        if self.abort.aborted:
            return FinishEvent("cancelled")
        context = self.provider.context
        return ErrorEvent(
            f"The reply from {self.model!r} ended before {context.provider} said it was done "
            f"(the connection to {self.provider.url} closed early). Try again; if it keeps "
            "happening, check the server's log.",
            ErrorCode.STREAM_INTERRUPTED,
        )

    def bad_frame(self, frame: bytes | str, exc: Exception) -> ErrorEvent:
        """The ``BAD_RESPONSE`` event for a frame that is not what the wire format says."""
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        what = "a line" if self._framing == "ndjson" else "an event"
        provider = self.provider
        return ErrorEvent(
            f"{_capital(provider.context.provider)} at {provider.url} sent {what} that is not "
            f"{provider.wire} ({reason}) in the reply from {self.model!r}: {excerpt(frame)}. "
            f"{_check(provider.context)}",
            ErrorCode.BAD_RESPONSE,
        )

    def error(self, exc: BaseException) -> OllmError:
        """The ``OllmError`` for a failure of the connection while the reply streamed."""
        return self.provider.http.error(
            exc, model=self.model, streaming=self.reply is not None, timeouts=self._timeouts
        )

    def failure(self, exc: Exception) -> ProviderEvent:
        """The event that ends the stream after ``exc`` (call it from ``except``)."""
        if isinstance(exc, _Aborted):
            return FinishEvent("cancelled")
        return failure_event(
            exc,
            self.abort,
            connection_error=self.error,
            reading=f"Reading the reply from {self.provider.url}",
            report="the server's name and version, and the model",
            logger=log,
        )

    async def aclose(self) -> None:
        """Finish: the connection goes back to the pool after a reply read to its end."""
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        reply, self.reply = self.reply, None
        if reply is None:
            return
        if self._finished and not self.abort.aborted:
            await drain(_raising(self.reads))
        await reply.aclose()


def _header_value(key: str) -> str:
    """``key`` as a header value: itself when it is printable ASCII (a conversation id
    is), else a digest of it, since no header can carry the rest."""
    if key.isascii() and key.isprintable():
        return key
    import hashlib

    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


async def _nothing() -> bytes | None:
    return None


def _reader(
    response: httpx.Response, abort: AbortSignal, *, guarded: bool
) -> Callable[[], Awaitable[bytes | None]]:
    """The next block of the body, ``None`` at its end; each read guarded by the signal
    when it cannot shut the socket (an injected transport)."""
    reads = body_reader(response)

    async def read() -> bytes | None:
        try:
            if not guarded:
                return await reads()
            with abort.guard() as scope:
                data = await reads()
            if scope.cancelled_caught:
                raise _Aborted
            return data
        except StopAsyncIteration:
            return None

    return read


def _raising(reads: Callable[[], Awaitable[bytes | None]]) -> Callable[[], Awaitable[bytes]]:
    """``reads`` as ``drain`` takes it: ``StopAsyncIteration`` at the end."""

    async def read() -> bytes:
        data = await reads()
        if data is None:
            raise StopAsyncIteration
        return data

    return read
