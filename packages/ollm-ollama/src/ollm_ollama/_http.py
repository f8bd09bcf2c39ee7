"""The requests of one provider, on ollm-http, failing with ollm's errors.

``ollm_http.HTTPClient`` holds the pool (one per event loop, ollm's llhttp transport,
or httpx's own stack with ``OLLM_OLLAMA_HTTP=httpx`` or behind a proxy); this adds
Ollama's routes, its JSON and the wording of its errors.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import httpx
import msgspec

from ollm import __version__ as ollm_version
from ollm.errors import BadResponseError, OllmError
from ollm_http import ErrorContext, HTTPClient, HTTPConfig, Limits, Timeouts, close_response
from ollm_ollama._config import ENV_CONNECT_TIMEOUT, ENV_HOST, ENV_TIMEOUT, OllamaConfig
from ollm_ollama._errors import PROVIDER, error_from_status, excerpt
from ollm_ollama._version import __version__
from ollm_ollama._wire import decoder

__all__ = ["OllamaHTTP"]

log = logging.getLogger(__name__)

# Streams ask for no compression: a proxy that gzips NDJSON holds lines back.
STREAM_HEADERS = {"Accept": "application/x-ndjson", "Accept-Encoding": "identity"}

CONTEXT = ErrorContext(
    provider="Ollama",
    code_name=PROVIDER,
    url_setting=f"{ENV_HOST} (or host=...)",
    start_hint="Start it with: ollama serve",
    timeout_setting=ENV_TIMEOUT,
    connect_timeout_setting=ENV_CONNECT_TIMEOUT,
    read_timeout_hint=(
        f"loading a large model for the first time can take minutes: raise the timeout "
        f"({ENV_TIMEOUT}=600, or timeout=... when building the provider)"
    ),
)


class OllamaHTTP:
    """Requests to one Ollama server."""

    def __init__(
        self, config: OllamaConfig, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self._timeouts = Timeouts.uniform(config.connect_timeout, config.timeout)
        self.timeout = httpx.Timeout(**self._timeouts.as_httpx())
        self.short_timeout = httpx.Timeout(**Timeouts.quick(config.connect_timeout).as_httpx())
        self._http = HTTPClient(
            HTTPConfig(
                config.host,
                headers={
                    "User-Agent": f"ollm/{ollm_version} ollm-ollama/{__version__}",
                    "Content-Type": "application/json",
                    "Accept": "application/json",
                    **config.headers,
                },
                timeouts=self._timeouts,
                limits=Limits(),
                # A local server needs no proxy.
                trust_env=not config.loopback,
                context=CONTEXT,
            ),
            stack="httpx" if config.http == "httpx" else "builtin",
            transport=transport,
        )

    @property
    def url(self) -> str:
        """The server's base URL."""
        return self.config.host

    def client(self) -> httpx.AsyncClient:
        """The pool for the running event loop."""
        return self._http.client()

    async def aclose(self) -> None:
        """Close the pool (a later request opens a new one)."""
        await self._http.aclose()

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
        request = client.build_request(
            method,
            self._http.url(path),
            content=body,
            headers=STREAM_HEADERS if stream else None,
            timeout=timeout if timeout is not None else self.timeout,
        )
        try:
            response = await client.send(request, stream=stream)
        except (httpx.HTTPError, OSError, ImportError) as exc:
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
        """The ``OllmError`` for an exception of httpx (``ollm_http``'s mapping)."""
        read = (timeout or self.timeout).read
        timeouts = dataclasses.replace(self._timeouts, read=read if read is not None else math.inf)
        return self._http.error(exc, model=model, streaming=streaming, timeouts=timeouts)
