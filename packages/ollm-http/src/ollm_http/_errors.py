"""One mapping of connection failures to ollm's errors, worded for the provider at hand."""

from __future__ import annotations

import re
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
from ollm_http._body import BodyDecodingError
from ollm_http._config import ErrorContext, Timeouts, without_userinfo
from ollm_http._connection import BadHTTPError

__all__ = ["RedirectRefusedError", "describe", "error_from_exception", "excerpt"]


class RedirectRefusedError(httpx.HTTPError):
    """A redirect ollm does not follow: a request with a body, or a method other than
    GET and HEAD, sent on to another server (``error_from_exception`` words it)."""

    def __init__(self, method: str, source: httpx.URL, target: httpx.URL) -> None:
        self.method = method
        self.source = without_userinfo(str(source))
        self.target = without_userinfo(str(target))
        super().__init__(f"{method} {self.source} was redirected to {self.target}")


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception, for the end of an error message."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# ``scheme://user:password@``: what a URL in an exception's text may carry.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*@")


def _without_credentials(text: str) -> str:
    return _USERINFO.sub(r"\1", text)


def _is_tls_failure(exc: BaseException) -> bool:
    # "Want read/write" is TLS waiting for bytes, not a failure: a timeout or a
    # cancellation inside a TLS read carries it as its context.
    return isinstance(exc, ssl.SSLError) and not isinstance(
        exc, (ssl.SSLWantReadError, ssl.SSLWantWriteError)
    )


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
    No message shows credentials: ``url`` and any URL in an exception's text lose
    their ``user:password@``.
    """
    if isinstance(exc, OllmError):
        return exc
    failure = _Failure(exc, without_userinfo(url), context, timeouts or Timeouts(), model)
    tls = next((e for e in failure.chain if _is_tls_failure(e)), None)
    # A timeout is a timeout, over TLS too (a handshake that never ends, a silence
    # before the reply); once part of the reply was given, the handshake is long done:
    # a TLS failure then (a corrupt record) is a broken stream, worded below.
    if tls is not None and not streaming and not isinstance(exc, httpx.TimeoutException):
        return failure.tls(tls)
    if isinstance(exc, RedirectRefusedError):
        return failure.redirect_refused(exc)
    if isinstance(exc, httpx.DecodingError):
        return failure.unreadable(exc)
    if isinstance(exc, httpx.TimeoutException):
        return failure.timed_out(exc)
    if isinstance(exc, _UNREACHABLE) or failure.needs_socks():
        return failure.unreachable(exc)
    if isinstance(exc, (httpx.TooManyRedirects, BadHTTPError)):
        return failure.bad_http(exc)
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return failure.broken(streaming)
    return ProviderError(
        f"Talking to {failure.who} failed: {failure.detail}. Try again; if it keeps "
        "happening, check the server.",
        **failure.common,
    )


# Failures to reach the server at all: a proxy, SOCKS, the address, nobody listening.
_UNREACHABLE = (
    httpx.ProxyError,
    ImportError,  # SOCKS's package, missing
    httpx.ConnectError,
    httpx.UnsupportedProtocol,
    httpx.InvalidURL,
)


class _Failure:
    """One failure of the connection, and its message by family (each method one)."""

    __slots__ = ("chain", "common", "context", "detail", "subject", "timeouts", "url", "who")

    def __init__(
        self,
        exc: BaseException,
        url: str,
        context: ErrorContext,
        timeouts: Timeouts,
        model: str | None,
    ) -> None:
        self.url = url
        self.context = context
        self.timeouts = timeouts
        self.who = f"{context.provider} at {url}"
        # The provider's name may start lower-case ("the Gemini API"): so does ``who``,
        # and ``subject`` starts a sentence.
        self.subject = _capital(self.who)
        self.common: dict[str, Any] = {"provider": context.code_name, "model": model}
        self.detail = _without_credentials(describe(exc))
        self.chain = _chain(exc)

    def tls(self, tls: BaseException) -> OllmError:
        certificate = isinstance(tls, ssl.SSLCertVerificationError)
        step = (
            "If the server uses a private certificate authority, point SSL_CERT_FILE at its "
            "certificate (or pass verify= with the CA bundle's path)."
            if certificate
            else "Check that the address uses https only if the server speaks TLS there."
        )
        what = "certificate could not be verified" if certificate else "TLS handshake failed"
        reason = _without_credentials(describe(tls))
        return TLSError(f"The {what} for {self.who} ({reason}). {step}", **self.common)

    def redirect_refused(self, exc: RedirectRefusedError) -> OllmError:
        setting = self.context.url_setting
        where = f"set {setting} to that address" if setting else "use that address"
        return BadResponseError(
            f"{self.subject} redirected {exc.method} {exc.source} to {exc.target}, another "
            "server. ollm does not send a request's body (a conversation) or its credentials "
            f"on to another server. If the server has moved there, {where}.",
            **self.common,
        )

    def unreadable(self, exc: httpx.DecodingError) -> OllmError:
        said = (
            _without_credentials(str(exc))
            if isinstance(exc, BodyDecodingError)
            else f"its compressed data is corrupt ({self.detail}). Try again; if it keeps "
            "happening, check the server and any proxy between them"
        )
        return BadResponseError(
            f"{self.subject} sent a reply ollm cannot read: {said}.", **self.common
        )

    def timed_out(self, exc: httpx.TimeoutException) -> OllmError:
        context, who = self.context, self.who
        if isinstance(exc, httpx.ConnectTimeout):
            setting = context.connect_timeout_setting
            raise_it = f" or raise {setting}" if setting else ""
            return RequestTimeoutError(
                f"Connecting to {who} took longer than {self.timeouts.connect:g} s. Check that "
                f"the server is up and reachable{raise_it}.",
                **self.common,
            )
        if isinstance(exc, httpx.ReadTimeout):
            hint = context.read_timeout_hint or (
                f"raise the timeout ({context.timeout_setting})"
                if context.timeout_setting
                else "raise the read timeout"
            )
            return RequestTimeoutError(
                f"{self.subject} sent nothing for {self.timeouts.read:g} s. {_capital(hint)}.",
                **self.common,
            )
        if isinstance(exc, httpx.PoolTimeout):
            return RequestTimeoutError(
                f"Every connection to {who} stayed busy for too long ({self.detail}). Lower the "
                "number of requests at once, or raise the connection limit.",
                **self.common,
            )
        setting = f" Raise {context.timeout_setting}." if context.timeout_setting else ""
        return RequestTimeoutError(
            f"A request to {who} timed out ({self.detail}).{setting}", **self.common
        )

    def needs_socks(self) -> bool:
        """Whether a SOCKS proxy is set and its extra package is missing."""
        return any(isinstance(e, ImportError) and "socksio" in str(e) for e in self.chain)

    def unreachable(self, exc: BaseException) -> OllmError:
        url, context, detail = self.url, self.context, self.detail
        if isinstance(exc, httpx.ProxyError):
            return ConnectionFailedError(
                f"The proxy between ollm and {self.who} failed ({detail}). Check the "
                "HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY variables.",
                **self.common,
            )
        if isinstance(exc, ImportError) or self.needs_socks():
            return InvalidRequestError(
                f"A SOCKS proxy is set for {url} (ALL_PROXY or HTTPS_PROXY), and SOCKS needs an "
                "extra package: pip install 'httpx[socks]'. Or unset the proxy variable.",
                **self.common,
            )
        if isinstance(exc, httpx.ConnectError):
            if any(isinstance(e, socket.gaierror) for e in self.chain) or any(
                marker in str(e).lower() for e in self.chain for marker in _NAME_ERRORS
            ):
                return ConnectionFailedError(
                    f"Cannot find the host of {url} ({detail}). {_setting(context)}",
                    **self.common,
                )
            start = (
                context.start_hint or f"Start it, or check {context.url_setting or 'the address'}."
            )
            return ConnectionFailedError(
                f"{_capital(context.provider)} is not running at {url}. {start}", **self.common
            )
        return InvalidRequestError(
            f"The address {url} is not usable for {context.provider} ({detail}). "
            f"{_setting(context)}",
            **self.common,
        )

    def broken(self, streaming: bool) -> OllmError:
        if streaming:
            return StreamInterruptedError(
                f"The connection to {self.who} broke before the reply was complete "
                f"({self.detail}). Try again; if it keeps happening, check the server's log.",
                **self.common,
            )
        return ConnectionFailedError(
            f"{self.subject} closed the connection without answering ({self.detail}). Check "
            f"that it is the right server and look at its log. {_setting(self.context)}",
            **self.common,
        )

    def bad_http(self, exc: BaseException) -> OllmError:
        setting = _setting(self.context)
        if isinstance(exc, httpx.TooManyRedirects):
            return BadResponseError(
                f"{self.subject} redirected too many times ({self.detail}). {setting}",
                **self.common,
            )
        return BadResponseError(
            f"{self.subject} answered with something that is not valid HTTP ({exc}). Check "
            f"that {self.url} is the right server. {setting}",
            **self.common,
        )


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def excerpt(data: bytes, limit: int = 200) -> str:
    """Up to ``limit`` characters of ``data`` (a server's bytes) for an error message, quoted."""
    text = data[: limit * 4].decode("utf-8", "replace")
    # Bytes left out are a cut too: 4-byte characters can fill the limit exactly.
    if len(text) > limit or len(data) > limit * 4:
        return repr(text[:limit]) + "..."
    return repr(text)
