"""One mapping of connection failures to ollm's errors, worded for the provider at hand."""

from __future__ import annotations

import socket
import ssl
from typing import Any

import httpx

from ollm.errors import (
    BadResponseError,
    ConnectionFailedError,
    InvalidRequestError,
    OllmError,
    ProviderError,
    RequestTimeoutError,
    StreamInterruptedError,
    TLSError,
)
from ollm_http._config import ErrorContext, Timeouts
from ollm_http._connection import BadHTTPError

__all__ = ["describe", "error_from_exception", "excerpt"]


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception, for the end of an error message."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not known for known in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


_NAME_ERRORS = (
    "name or service not known",
    "nodename nor servname",
    "temporary failure in name resolution",
    "getaddrinfo failed",
    "no address associated",
)


def _setting(context: ErrorContext) -> str:
    return f"Check {context.url_setting}." if context.url_setting else "Check the server's address."


def error_from_exception(
    exc: BaseException,
    *,
    url: str,
    context: ErrorContext,
    timeouts: Timeouts | None = None,
    model: str | None = None,
    streaming: bool = False,
) -> OllmError:
    """The ``OllmError`` for a failure of the connection itself (httpx's exceptions).

    ``streaming`` says whether part of a reply was already given to the caller: a
    break then is ``STREAM_INTERRUPTED`` (the partial reply is kept by the runtime).
    """
    if isinstance(exc, OllmError):
        return exc
    who = f"{context.provider} at {url}"
    common: dict[str, Any] = {"provider": context.code_name, "model": model}
    detail = describe(exc)
    timeouts = timeouts or Timeouts()
    chain = _chain(exc)
    tls = next((e for e in chain if isinstance(e, ssl.SSLError)), None)
    # Once part of the reply was given, the handshake is long done: a TLS failure then
    # (a corrupt record) is a broken stream, worded and coded as one below.
    if tls is not None and not streaming:
        certificate = isinstance(tls, ssl.SSLCertVerificationError)
        step = (
            "If the server uses a private certificate authority, point SSL_CERT_FILE at its "
            "certificate (or pass verify= with the CA bundle's path)."
            if certificate
            else "Check that the address uses https only if the server speaks TLS there."
        )
        what = "certificate could not be verified" if certificate else "TLS handshake failed"
        return TLSError(f"The {what} for {who} ({describe(tls)}). {step}", **common)
    if isinstance(exc, httpx.ConnectTimeout):
        seconds = timeouts.connect
        raise_it = (
            f" or raise {context.connect_timeout_setting}"
            if context.connect_timeout_setting
            else ""
        )
        return RequestTimeoutError(
            f"Connecting to {who} took longer than {seconds:g} s. Check that the server is up "
            f"and reachable{raise_it}.",
            **common,
        )
    if isinstance(exc, httpx.ReadTimeout):
        seconds = timeouts.read
        hint = context.read_timeout_hint or (
            f"raise the timeout ({context.timeout_setting})"
            if context.timeout_setting
            else "raise the read timeout"
        )
        return RequestTimeoutError(
            f"{who} sent nothing for {seconds:g} s. {hint[0].upper()}{hint[1:]}.", **common
        )
    if isinstance(exc, httpx.PoolTimeout):
        return RequestTimeoutError(
            f"Every connection to {who} stayed busy for too long ({detail}). Lower the number "
            "of requests at once, or raise the connection limit.",
            **common,
        )
    if isinstance(exc, httpx.TimeoutException):
        setting = f" Raise {context.timeout_setting}." if context.timeout_setting else ""
        return RequestTimeoutError(f"A request to {who} timed out ({detail}).{setting}", **common)
    if isinstance(exc, httpx.ProxyError):
        return ConnectionFailedError(
            f"The proxy between ollm and {who} failed ({detail}). Check the HTTP_PROXY, "
            "HTTPS_PROXY, ALL_PROXY and NO_PROXY variables.",
            **common,
        )
    if isinstance(exc, ImportError) or any(
        isinstance(e, ImportError) and "socksio" in str(e) for e in chain
    ):
        return InvalidRequestError(
            f"A SOCKS proxy is set for {url} (ALL_PROXY or HTTPS_PROXY), and SOCKS needs an extra "
            "package: pip install 'httpx[socks]'. Or unset the proxy variable.",
            **common,
        )
    if isinstance(exc, httpx.ConnectError):
        if any(isinstance(e, socket.gaierror) for e in chain) or any(
            marker in str(e).lower() for e in chain for marker in _NAME_ERRORS
        ):
            return ConnectionFailedError(
                f"Cannot find the host of {url} ({detail}). {_setting(context)}", **common
            )
        where = context.url_setting or "the address"
        start = context.start_hint or f"Start it, or check {where}."
        return ConnectionFailedError(
            f"{context.provider} is not running at {url}. {start}", **common
        )
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.InvalidURL)):
        return InvalidRequestError(
            f"{url} is not a usable address for {context.provider} ({detail}). {_setting(context)}",
            **common,
        )
    if isinstance(exc, httpx.TooManyRedirects):
        return BadResponseError(
            f"{who} redirected too many times ({detail}). {_setting(context)}", **common
        )
    if isinstance(exc, BadHTTPError):
        return BadResponseError(
            f"{who} answered with something that is not valid HTTP ({exc}). Check that "
            f"{url} is the right server. {_setting(context)}",
            **common,
        )
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        if streaming:
            return StreamInterruptedError(
                f"The connection to {who} broke before the reply was complete ({detail}). "
                "Try again; if it keeps happening, check the server's log.",
                **common,
            )
        return ConnectionFailedError(
            f"{who} closed the connection without answering ({detail}). Check that it is "
            f"the right server and look at its log. {_setting(context)}",
            **common,
        )
    return ProviderError(
        f"Talking to {who} failed: {detail}. Try again; if it keeps happening, check the server.",
        **common,
    )


def excerpt(data: bytes, limit: int = 200) -> str:
    """Up to ``limit`` characters of ``data`` (a server's bytes) for an error message, quoted."""
    text = data[: limit * 4].decode("utf-8", "replace")
    # Bytes left out are a cut too: 4-byte characters can fill the limit exactly.
    if len(text) > limit or len(data) > limit * 4:
        return repr(text[:limit]) + "..."
    return repr(text)
