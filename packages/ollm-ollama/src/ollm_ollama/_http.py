"""The connection pool of one provider, and requests that fail with ollm's errors.

One ``httpx.AsyncClient`` per provider, built on first use and closed by ``aclose``.
A pool belongs to the event loop that opened its connections, so a provider used from
a new loop (a second ``anyio.run``, another test) gets a fresh pool instead of dead
connections. Proxies from the environment never apply to a server on this machine.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import msgspec

from ollm import __version__ as ollm_version
from ollm.errors import BadResponseError, OllmError
from ollm_ollama._config import OllamaConfig
from ollm_ollama._errors import error_from_exception, error_from_status
from ollm_ollama._ndjson import excerpt
from ollm_ollama._transport import PlainHTTPTransport
from ollm_ollama._version import __version__
from ollm_ollama._wire import decoder

__all__ = ["OllamaHTTP", "close_response"]

log = logging.getLogger(__name__)

# Streams ask for no compression: a proxy that gzips NDJSON holds lines back.
STREAM_HEADERS = {"Accept": "application/x-ndjson", "Accept-Encoding": "identity"}


def _seconds(value: float) -> float | None:
    return None if math.isinf(value) else value


class OllamaHTTP:
    """Requests to one Ollama server."""

    def __init__(
        self, config: OllamaConfig, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._loop: object = None
        self._urls: dict[str, httpx.URL] = {}
        self.timeout = httpx.Timeout(
            connect=_seconds(config.connect_timeout),
            read=_seconds(config.timeout),
            write=_seconds(config.timeout),
            pool=_seconds(config.timeout),
        )
        short = _seconds(max(config.connect_timeout, 10.0))
        self.short_timeout = httpx.Timeout(
            connect=_seconds(config.connect_timeout), read=short, write=short, pool=short
        )

    @property
    def url(self) -> str:
        """The server's base URL."""
        return self.config.host

    def client(self) -> httpx.AsyncClient:
        """The pool for the running event loop."""
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
        headers = {
            "User-Agent": f"ollm/{ollm_version} ollm-ollama/{__version__}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            **config.headers,
        }
        transport = self._transport
        if transport is None and self._builtin_applies():
            transport = PlainHTTPTransport()
        return httpx.AsyncClient(
            base_url=config.host,
            headers=headers,
            timeout=self.timeout,
            transport=transport,
            # An injected transport is the whole network; a local server needs no proxy.
            trust_env=transport is None and not config.loopback,
            follow_redirects=True,
        )

    def _builtin_applies(self) -> bool:
        """ollm's transport serves plain http with no proxy; httpx does the rest."""
        config = self.config
        if config.http != "builtin" or not config.host.startswith("http://"):
            return False
        if config.loopback:
            return True
        import urllib.request

        host = httpx.URL(config.host).host
        proxies = urllib.request.getproxies()
        proxied = bool(proxies.get("http") or proxies.get("all"))
        return not proxied or bool(urllib.request.proxy_bypass(host))

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

    async def send(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        model: str | None = None,
        stream: bool = False,
        timeout: httpx.Timeout | None = None,
    ) -> httpx.Response:
        """Send a request; a status of 400 or more raises the matching ``OllmError``."""
        client = self.client()
        url = self._urls.get(path)
        if url is None:
            # Parsed once per route: httpx would parse and join it on every request.
            url = self._urls[path] = httpx.URL(self.config.host + path)
        request = client.build_request(
            method,
            url,
            content=body,
            headers=STREAM_HEADERS if stream else None,
            timeout=timeout if timeout is not None else self.timeout,
        )
        try:
            response = await client.send(request, stream=stream)
        except httpx.HTTPError as exc:
            raise self.error(exc, model=model, timeout=timeout) from None
        if response.status_code >= 400:
            try:
                content = await response.aread() if stream else response.content
            except httpx.HTTPError:
                content = b""
            finally:
                if stream:
                    await close_response(response)
            raise error_from_status(
                response.status_code, content, config=self.config, path=path, model=model
            )
        return response

    async def call(
        self,
        method: str,
        path: str,
        payload: msgspec.Struct | None = None,
        *,
        kind: type[Any] | None = None,
        model: str | None = None,
        timeout: httpx.Timeout | None = None,
    ) -> Any:
        """A request and its JSON answer decoded as ``kind`` (or ignored when ``None``).

        Some routes answer 200 with an empty body (delete, copy): pass ``kind=None``.
        """
        body = msgspec.json.encode(payload) if payload is not None else None
        response = await self.send(method, path, body=body, model=model, timeout=timeout)
        if kind is None:
            return None
        return self.decode(response.content, kind, path)

    def decode(self, content: bytes, kind: type[Any], path: str) -> Any:
        """``content`` decoded as ``kind``, or ``BadResponseError`` naming where it broke."""
        try:
            return decoder(kind).decode(content)
        except msgspec.DecodeError as exc:
            raise BadResponseError(
                f"Ollama at {self.url} answered {path} with something that is not in its "
                f"documented format ({exc}): {excerpt(content)}. Check that {self.url} is "
                "an Ollama server; if Ollama is newer than ollm-ollama, update ollm-ollama.",
                provider="ollama",
            ) from None

    def error(
        self,
        exc: BaseException,
        *,
        model: str | None = None,
        streaming: bool = False,
        timeout: httpx.Timeout | None = None,
    ) -> OllmError:
        """The ``OllmError`` for an exception of httpx."""
        read = (timeout or self.timeout).read
        return error_from_exception(
            exc,
            config=self.config,
            model=model,
            streaming=streaming,
            read_timeout=read if read is not None else math.inf,
        )


async def close_response(response: httpx.Response) -> None:
    """Close ``response`` even while the task is being cancelled: the server must see it."""
    with anyio.CancelScope(shield=True):
        try:
            await response.aclose()
        except Exception:
            log.debug("closing a response failed", exc_info=True)
