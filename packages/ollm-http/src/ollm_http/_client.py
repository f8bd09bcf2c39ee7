"""HTTPClient: one provider's server, a pool per event loop, replies that fail as ollm errors."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import anyio.lowlevel
import httpx
import msgspec

from ollm.errors import OllmError
from ollm_http._body import body_reader
from ollm_http._config import (
    HTTPConfig,
    Timeouts,
    check_header,
    split_credentials,
    without_userinfo,
)
from ollm_http._errors import error_from_exception
from ollm_http._lines import EventSplitter, LineSplitter, ServerSentEvent
from ollm_http._redirects import GuardedClient
from ollm_http._tls import ssl_context

__all__ = ["HTTPClient", "Reply"]

log = logging.getLogger("ollm_http")

Stack = Literal["builtin", "httpx"]


class Reply:
    """A reply: its status and headers at once, its body read or streamed on demand.

    The body is decoded (gzip, deflate; see ``body_reader``) whatever the transport,
    and a body already in memory (``httpx.MockTransport``) is read from there.
    Failures while reading raise ``OllmError`` (``STREAM_INTERRUPTED``, ``TIMEOUT``,
    ``BAD_RESPONSE``...), never httpx's exceptions.
    """

    __slots__ = ("_client", "_content", "_model", "response")

    def __init__(self, response: httpx.Response, client: HTTPClient, model: str | None) -> None:
        self.response = response
        self._client = client
        self._model = model
        self._content: bytes | None = None

    @property
    def status(self) -> int:
        """The HTTP status code."""
        return self.response.status_code

    @property
    def headers(self) -> httpx.Headers:
        """The reply's headers (case-insensitive)."""
        return self.response.headers

    @property
    def content(self) -> bytes:
        """The whole body (after ``aread()``, or from ``HTTPClient.request``)."""
        if self._content is None:
            raise RuntimeError("the body was not read: call `await reply.aread()` first")
        return self._content

    async def aread(self) -> bytes:
        """The whole body."""
        if self._content is None:
            parts = [block async for block in self.blocks()]
            self._content = b"".join(parts)
        return self._content

    def json(self, kind: Any = Any) -> Any:
        """The body decoded as JSON (as ``kind`` if given).

        ``msgspec.DecodeError`` if it is not JSON, including JSON nested deeper than
        msgspec goes (about 1,000 levels); ``msgspec.ValidationError`` if it is not a
        ``kind``.
        """
        try:
            return msgspec.json.decode(self.content, type=kind)
        except RecursionError:
            raise msgspec.DecodeError("JSON is malformed: nested too deeply") from None

    async def blocks(self) -> AsyncIterator[bytes]:
        """The body, decoded, as the blocks that arrive (any size, never empty)."""
        try:
            reads = body_reader(self.response, limits=self._client.config.limits)
            while True:
                try:
                    block = await reads()
                except StopAsyncIteration:
                    return
                if block:
                    yield block
        except httpx.HTTPError as exc:
            raise self._client.error(exc, model=self._model, streaming=True) from None

    async def lines(self) -> AsyncIterator[bytes]:
        """The body's lines (NDJSON), without line ends; a last line without one too."""
        splitter = LineSplitter(self._client.config.limits.max_line)
        async for block in self.blocks():
            for line in splitter.feed(block):
                yield line
        last = splitter.end()
        if last is not None:
            yield last

    async def sse(self) -> AsyncIterator[ServerSentEvent]:
        """The body's Server-Sent Events (``event``, ``data``, ``id``, ``retry``)."""
        splitter = EventSplitter(self._client.config.limits.max_line)
        async for block in self.blocks():
            for event in splitter.feed(block):
                yield event
        for event in splitter.end():
            yield event

    async def aclose(self) -> None:
        """Release the connection, even while the task is being cancelled."""
        with anyio.CancelScope(shield=True):
            try:
                await self.response.aclose()
            except Exception:
                log.debug("closing a reply failed", exc_info=True)

    def __repr__(self) -> str:
        try:
            request = self.response.request
        except RuntimeError:  # a response built by hand has no request
            return f"<Reply {self.status}>"
        return f"<Reply {self.status} to {request.method} {without_userinfo(str(request.url))}>"


class HTTPClient:
    """Requests to one server, with a connection pool per event loop.

    ::

        client = HTTPClient(HTTPConfig("http://127.0.0.1:8000/v1", context=ErrorContext(...)))
        async with client.stream("POST", "/chat/completions", json=payload) as reply:
            async for event in reply.sse():
                ...

    ``stack="builtin"`` (the default) uses ollm's transport (llhttp, pooled, on anyio)
    for servers reached directly; a server behind a proxy from the environment, or a
    ``stack="httpx"`` client, goes through httpx's own stack. ``transport=`` replaces
    both (tests, a custom network).
    """

    def __init__(
        self,
        config: HTTPConfig,
        *,
        stack: Stack = "builtin",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base_url, authorization = split_credentials(config.base_url)
        self.config = config
        self.base_url = base_url.rstrip("/")
        self._stack = stack
        self._transport = transport
        self._headers = dict(config.headers)
        given = {name.lower() for name in self._headers}
        if "accept-encoding" not in given:
            # What body_reader decodes, whatever httpx would offer with brotli installed.
            self._headers["Accept-Encoding"] = "gzip, deflate"
        if authorization and "authorization" not in given:
            self._headers["Authorization"] = authorization
        self._client: httpx.AsyncClient | None = None
        self._loop: object = None
        self._urls: dict[str, httpx.URL] = {}

    def __repr__(self) -> str:
        return f"HTTPClient({self.base_url!r}, stack={self._stack!r})"

    def client(self) -> httpx.AsyncClient:
        """The httpx client (and its pool) of the running event loop."""
        loop = anyio.lowlevel.current_token().native_token
        client = self._client
        if client is None or loop is not self._loop:
            if client is not None:
                log.debug("the event loop changed: opening a new connection pool")
            client = self._client = self._build()
            self._loop = loop
        return client

    def _build(self) -> httpx.AsyncClient:
        config = self.config
        transport = self._transport
        mounts: dict[str, httpx.AsyncBaseTransport | None] | None = None
        if transport is None and self._stack == "builtin":
            transport = _builtin_transport(config)
            if transport is not None and config.trust_env:
                # Servers behind a proxy from the environment go through httpx's stack.
                mounts = _proxy_mounts(config)
        return GuardedClient(
            is_secret=config.is_secret,
            body_limits=config.limits,
            headers=self._headers,
            timeout=httpx.Timeout(**config.timeouts.as_httpx()),
            transport=transport,
            mounts=mounts,
            verify=ssl_context(config.verify, trust_env=config.trust_env),
            trust_env=config.trust_env and transport is None,
            follow_redirects=config.follow_redirects,
            limits=httpx.Limits(
                max_connections=config.limits.max_connections,
                max_keepalive_connections=config.limits.max_idle,
                keepalive_expiry=config.limits.keepalive_expiry,
            ),
        )

    def url(self, path: str) -> httpx.URL:
        """The full URL of ``path`` (parsed once per path).

        ``InvalidRequestError`` for an address no request can go to (no host, a port
        out of range, brackets that hold no IPv6 address), naming it and its setting.
        """
        url = self._urls.get(path)
        if url is None:
            try:
                url = httpx.URL(self.base_url + path)
            except httpx.InvalidURL as exc:
                raise self.error(exc) from None
            if not url.host:
                # httpx would take it for a relative URL and blame its scheme.
                raise self.error(httpx.InvalidURL("it has no host"))
            if url.port is not None and not 0 < url.port < 65536:
                raise self.error(httpx.InvalidURL(f"Invalid port: {url.port}"))
            self._urls[path] = url
        return url

    def error(
        self,
        exc: BaseException,
        *,
        model: str | None = None,
        streaming: bool = False,
        timeouts: Timeouts | None = None,
    ) -> OllmError:
        """The ``OllmError`` for a failure of the connection (see ``error_from_exception``)."""
        return error_from_exception(
            exc,
            url=self.base_url,
            context=self.config.context,
            timeouts=timeouts or self.config.timeouts,
            model=model,
            streaming=streaming,
        )

    async def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        model: str | None = None,
        stream: bool,
    ) -> Reply:
        if json is not None:
            content = msgspec.json.encode(json)
            headers = {"Content-Type": "application/json", **(headers or {})}
        if headers:
            for name, value in headers.items():
                check_header(name, value, self.config.context)
        client = self.client()
        request = client.build_request(
            method,
            self.url(path),
            content=content,
            headers=headers,
            timeout=httpx.Timeout(**timeouts.as_httpx()) if timeouts else httpx.USE_CLIENT_DEFAULT,
        )
        try:
            response = await client.send(request, stream=stream)
        except (httpx.HTTPError, OSError, ImportError) as exc:
            raise self.error(exc, model=model, timeouts=timeouts) from None
        return Reply(response, self, model)

    async def open(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        model: str | None = None,
    ) -> Reply:
        """Send a request and return its reply with the body unread; close it when done.

        For a provider's own stream loop (``await reply.aclose()`` in a ``finally``);
        ``stream`` is the same as a context manager.
        """
        return await self._send(
            method,
            path,
            json=json,
            content=content,
            headers=headers,
            timeouts=timeouts,
            model=model,
            stream=True,
        )

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        model: str | None = None,
    ) -> AsyncIterator[Reply]:
        """Send a request; the reply streams inside the block and is closed after it.

        ``json`` is encoded with msgspec (a ``msgspec.Struct``, dicts, lists...).
        Leaving the block early (``break``, an exception, a cancel scope) closes the
        connection instead of returning it to the pool.
        """
        reply = await self.open(
            method,
            path,
            json=json,
            content=content,
            headers=headers,
            timeouts=timeouts,
            model=model,
        )
        try:
            yield reply
        finally:
            await reply.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        model: str | None = None,
    ) -> Reply:
        """Send a request and read its whole reply (``reply.content``, ``reply.json()``)."""
        async with self.stream(
            method,
            path,
            json=json,
            content=content,
            headers=headers,
            timeouts=timeouts,
            model=model,
        ) as reply:
            await reply.aread()
        return reply

    async def aclose(self) -> None:
        """Close the pool (a later request opens a new one).

        A pool opened by an event loop that has ended cannot be closed from another
        one (its connections belong to the old loop): it is dropped instead.
        """
        client, self._client = self._client, None
        loop, self._loop = self._loop, None
        if client is None:
            return
        if loop is not anyio.lowlevel.current_token().native_token:
            log.debug("dropping a connection pool whose event loop has ended")
            return
        await client.aclose()


def _builtin_transport(config: HTTPConfig) -> httpx.AsyncBaseTransport | None:
    try:
        from ollm_http._transport import HTTPTransport
    except ImportError:  # httptools has no wheel here: httpx's own stack serves
        log.debug("httptools cannot be imported: using httpx's own HTTP stack", exc_info=True)
        return None
    return HTTPTransport(limits=config.limits, verify=config.verify)


def _proxy_mounts(config: HTTPConfig) -> dict[str, httpx.AsyncBaseTransport | None] | None:
    """httpx's proxy transports for the environment's proxies, unless the server is exempt."""
    import urllib.request

    proxies = urllib.request.getproxies()
    if not proxies:
        return None
    host = httpx.URL(config.base_url).host
    if urllib.request.proxy_bypass(host) or host in ("127.0.0.1", "localhost", "::1"):
        return None
    scheme = httpx.URL(config.base_url).scheme
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy:
        return None
    try:
        transport = httpx.AsyncHTTPTransport(
            proxy=proxy, verify=ssl_context(config.verify, trust_env=config.trust_env)
        )
    except ImportError as exc:  # a SOCKS proxy without socksio
        return {f"{scheme}://": _FailingTransport(exc)}
    return {f"{scheme}://": transport}


class _FailingTransport(httpx.AsyncBaseTransport):
    """Stands for a proxy that cannot be used, so the request fails with a clear error."""

    def __init__(self, exc: BaseException) -> None:
        self._exc = exc

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise self._exc
