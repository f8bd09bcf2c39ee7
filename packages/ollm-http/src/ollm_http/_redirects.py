"""Redirects that never carry a conversation or a credential to another server.

httpx follows redirects by itself and strips only ``Authorization`` on the way to
another origin: an API key in ``x-goog-api-key`` or ``api-key``, and the whole body of
a POST (a model request carries the conversation), would go wherever a 307 points.
``GuardedClient`` turns httpx's following off and follows redirects itself, on every
stack (ollm's transport, httpx's, an injected one):

- to the same site (scheme, host and port; or ``http://host`` on port 80 upgraded to
  ``https://host`` on port 443, where the request had already gone in the clear), a
  redirect is followed as httpx would, headers and body included;
- to another site, a GET or HEAD without a body is followed without its secret headers
  (``HTTPConfig.is_secret``), and any other request is refused with
  ``RedirectRefusedError``, which names both addresses without their credentials;
- at most ``MAX_REDIRECTS`` in a row (``httpx.TooManyRedirects``).

A reply read whole (``send(stream=False)``) is read through ``body_reader``, so that a
compressed one is decoded in bounded pieces, as a streamed one is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import httpx

from ollm_http._body import body_reader
from ollm_http._config import Limits
from ollm_http._errors import RedirectRefusedError

__all__ = ["MAX_REDIRECTS", "GuardedClient", "same_site"]

MAX_REDIRECTS = 10
_DEFAULT_PORTS = {"http": 80, "https": 443}
_SAFE = frozenset({"GET", "HEAD"})
# What is read of a redirect's own body, so its connection can serve the next hop.
_DISCARD = 64 * 1024


def _port(url: httpx.URL) -> int | None:
    return url.port if url.port is not None else _DEFAULT_PORTS.get(url.scheme)


def same_site(source: httpx.URL, target: httpx.URL) -> bool:
    """Whether a redirect from ``source`` to ``target`` stays with the same server."""
    if source.host != target.host:
        return False
    if source.scheme == target.scheme:
        return _port(source) == _port(target)
    return (source.scheme, _port(source), target.scheme, _port(target)) == (
        "http",
        80,
        "https",
        443,
    )


def _has_body(request: httpx.Request) -> bool:
    headers = request.headers
    return headers.get("content-length", "0") != "0" or "transfer-encoding" in headers


class GuardedClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` whose redirects follow ollm's rules (see the module)."""

    def __init__(
        self,
        *,
        is_secret: Callable[[str], bool],
        follow_redirects: bool,
        body_limits: Limits,
        **kwargs: Any,
    ) -> None:
        super().__init__(follow_redirects=False, **kwargs)
        self._is_secret = is_secret
        self._follow = follow_redirects
        self._body_limits = body_limits

    async def send(
        self,
        request: httpx.Request,
        *,
        stream: bool = False,
        auth: Any = httpx.USE_CLIENT_DEFAULT,
        follow_redirects: Any = httpx.USE_CLIENT_DEFAULT,
    ) -> httpx.Response:
        """Send ``request``, following redirects by ollm's rules (see the module)."""
        follow = self._follow if follow_redirects is httpx.USE_CLIENT_DEFAULT else follow_redirects
        history: list[httpx.Response] = []
        while True:
            response = await super().send(request, stream=True, auth=auth, follow_redirects=False)
            following = response.next_request
            if not follow or following is None:
                break
            try:
                if len(history) >= MAX_REDIRECTS:
                    raise httpx.TooManyRedirects(
                        f"more than {MAX_REDIRECTS} redirects in a row", request=request
                    )
                source = request.url
                request = self._next(request, following)
                if not same_site(source, request.url):
                    auth = None  # an auth= of the caller's is for the first server alone
                await _discard(response)
            finally:
                await response.aclose()
            history.append(response)
        response.history = history
        if not stream:
            return await self._read_whole(response)
        return response

    async def _read_whole(self, response: httpx.Response) -> httpx.Response:
        """The response with its body read; a compressed one through ``body_reader``
        (decoded in bounded pieces, not by httpx, which inflates a block at once)."""
        try:
            if "content-encoding" not in response.headers or response.is_stream_consumed:
                await response.aread()  # nothing to decode, or decoded in memory already
                return response
            reads = body_reader(response, limits=self._body_limits)
            parts: list[bytes] = []
            while True:
                try:
                    parts.append(await reads())
                except StopAsyncIteration:
                    break
        finally:
            await response.aclose()
        # Decoded now: given as it is, without its Content-Encoding.
        headers = [(k, v) for k, v in response.headers.multi_items() if k != "content-encoding"]
        whole = httpx.Response(
            response.status_code,
            headers=headers,
            content=b"".join(parts),
            request=response.request,
            extensions=response.extensions,
            history=response.history,
        )
        whole.elapsed = response.elapsed
        return whole

    def _next(self, request: httpx.Request, following: httpx.Request) -> httpx.Request:
        """The request a redirect asks for, by ollm's rules; httpx gave its URL and method."""
        target = following.url
        if target.userinfo:
            target = target.copy_with(userinfo=b"")  # credentials a server names: not sent
        same = same_site(request.url, target)
        if not same and (request.method not in _SAFE or _has_body(request)):
            raise RedirectRefusedError(request.method, request.url, target)
        headers = httpx.Headers(request.headers)
        headers["Host"] = target.netloc.decode("ascii")
        if following.method != request.method:  # 301, 302 or 303 to GET: the body stays
            for name in ("Content-Length", "Transfer-Encoding", "Content-Type"):
                headers.pop(name, None)
        if not same:
            for name in [name for name in headers if self._is_secret(name)]:
                del headers[name]
        return httpx.Request(
            following.method,
            target,
            headers=headers,
            stream=following.stream,
            extensions=request.extensions,
        )


async def _discard(response: httpx.Response) -> None:
    """Read a redirect's own (short) body, so its connection goes back to the pool."""
    read = 0
    with contextlib.suppress(httpx.HTTPError):  # a broken one only costs its connection
        async for block in response.aiter_raw():
            read += len(block)
            if read > _DISCARD:
                return
