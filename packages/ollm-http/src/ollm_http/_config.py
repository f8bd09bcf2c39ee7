"""What a provider tells the HTTP layer: its server, timeouts, limits, and how to word errors."""

from __future__ import annotations

import base64
import math
import ssl
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

from ollm.errors import InvalidRequestError

__all__ = [
    "ErrorContext",
    "HTTPConfig",
    "Limits",
    "Timeouts",
    "check_header",
    "is_secret_header",
    "split_credentials",
    "without_userinfo",
]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds allowed for each phase; ``math.inf`` (or ``None``) waits forever.

    ``read`` is the longest silence while a reply streams, not the whole reply.
    ``pool`` is how long a request waits for a free connection when the limit is
    reached.
    """

    connect: float | None = 10.0
    read: float | None = 300.0
    write: float | None = 60.0
    pool: float | None = 300.0

    @classmethod
    def uniform(cls, connect: float | None, seconds: float | None) -> Timeouts:
        """``connect`` to connect, ``seconds`` for every other phase (a provider's setting)."""
        return cls(connect=connect, read=seconds, write=seconds, pool=seconds)

    @classmethod
    def quick(cls, connect: float) -> Timeouts:
        """For requests that answer at once (model lists, health): at least 10 s a phase."""
        return cls.uniform(connect, max(connect, 10.0))

    def as_httpx(self) -> dict[str, float | None]:
        """The mapping httpx puts in ``request.extensions["timeout"]``."""
        return {
            "connect": _finite(self.connect),
            "read": _finite(self.read),
            "write": _finite(self.write),
            "pool": _finite(self.pool),
        }


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isinf(value) else value


@dataclass(frozen=True, slots=True)
class Limits:
    """Connections per server (host and port): at most ``max_connections`` at once,
    further requests wait (up to the pool timeout); at most ``max_idle`` kept alive
    between requests, each for ``keepalive_expiry`` seconds. ``max_line`` bounds one
    NDJSON line or one SSE event, so an endless line fails fast in bounded memory.

    ``max_ratio`` bounds a compressed body (gzip, deflate): past its first MiB, it may
    not decode to more than ``max_ratio`` bytes per compressed byte received (real
    JSON and event streams stay far below 100; a "zip bomb" is near 1,000).
    """

    max_connections: int = 100
    max_idle: int = 20
    keepalive_expiry: float = 5.0
    max_line: int = 8 * 1024 * 1024
    max_ratio: int = 100


@dataclass(frozen=True, slots=True)
class ErrorContext:
    """How failures are worded for one provider.

    ``provider`` names the server's kind ("Ollama", "the OpenAI-compatible server"),
    ``url_setting`` the variable or option that sets its address (``OLLAMA_HOST``),
    ``start_hint`` the next step when nothing listens there ("Start it with: ollama
    serve"), ``timeout_setting`` and ``connect_timeout_setting`` what raises the
    timeouts. ``code_name`` goes into the errors' ``provider`` field.
    """

    provider: str = "the server"
    code_name: str | None = None
    url_setting: str | None = None
    start_hint: str | None = None
    timeout_setting: str | None = None
    connect_timeout_setting: str | None = None
    read_timeout_hint: str | None = None


@dataclass(frozen=True, slots=True, repr=False)
class HTTPConfig:
    """One server: its base URL, default headers, timeouts, limits and TLS settings.

    Credentials in ``base_url`` (``http://user:secret@host``) become an
    ``Authorization: Basic`` header and leave the URL (so they are never logged).
    ``verify`` is ``True`` (the system's and ``SSL_CERT_FILE``/``SSL_CERT_DIR``'s
    authorities), ``False``, the path of a CA bundle, or an ``ssl.SSLContext``.
    ``trust_env`` lets ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``/``NO_PROXY``
    apply; a proxied server is reached through httpx's own stack.

    ``secret_headers`` names headers (any case) that carry credentials, beyond those
    ``is_secret_header`` always counts as secret: no secret header follows a redirect
    to another server, and ``repr()`` hides their values (and the URL's credentials).
    ``follow_redirects`` follows at most ``MAX_REDIRECTS`` redirects; one to another
    server is followed only by a GET or HEAD (see the README's redirect rules).
    ``affinity_header`` names the header that carries a streamed request's affinity
    key (its conversation's id), for a router in front of several servers; ``None``
    (the default) sends none.
    """

    base_url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeouts: Timeouts = field(default_factory=Timeouts)
    limits: Limits = field(default_factory=Limits)
    verify: bool | str | ssl.SSLContext = True
    trust_env: bool = True
    follow_redirects: bool = True
    context: ErrorContext = field(default_factory=ErrorContext)
    secret_headers: Collection[str] = ()
    affinity_header: str | None = None

    def __post_init__(self) -> None:
        for name, value in self.headers.items():
            check_header(name, value, self.context)

    def is_secret(self, name: str) -> bool:
        """Whether the header ``name`` carries a credential (built in, or configured)."""
        return is_secret_header(name) or name.lower() in {s.lower() for s in self.secret_headers}

    def __repr__(self) -> str:
        headers = {
            name: "<secret>" if self.is_secret(name) else value
            for name, value in self.headers.items()
        }
        return (
            f"HTTPConfig(base_url={without_userinfo(self.base_url)!r}, headers={headers!r}, "
            f"timeouts={self.timeouts!r}, limits={self.limits!r}, verify={self.verify!r}, "
            f"trust_env={self.trust_env!r}, follow_redirects={self.follow_redirects!r}, "
            f"context={self.context!r}, secret_headers={tuple(self.secret_headers)!r}, "
            f"affinity_header={self.affinity_header!r})"
        )


# Headers that carry credentials by name, and words that make any header one.
_SECRET_NAMES = frozenset(
    {"authorization", "proxy-authorization", "cookie", "x-goog-api-key", "api-key", "x-api-key"}
)
_SECRET_WORDS = ("key", "token", "secret", "auth", "cookie", "password", "credential", "session")


def is_secret_header(name: str) -> bool:
    """Whether a header carries a credential, whatever a provider configured.

    ``Authorization``, ``Proxy-Authorization``, ``Cookie``, ``x-goog-api-key``,
    ``api-key``, ``x-api-key``, and any name holding "key", "token", "secret",
    "auth", "cookie", "password", "credential" or "session" (``X-Auth-Token``,
    ``Ocp-Apim-Subscription-Key``). Their values never leave for another server on a
    redirect and never appear in a ``repr()``.
    """
    lowered = name.lower()
    return lowered in _SECRET_NAMES or any(word in lowered for word in _SECRET_WORDS)


_FORBIDDEN = frozenset("\r\n\0")


def check_header(name: str, value: str, context: ErrorContext | None = None) -> None:
    """Refuse a header whose name or value holds CR, LF or NUL, or what is not ASCII,
    before anything is sent; the message names the header, never its value.

    CR or LF would end the line early on the wire: a second, forged header (even a
    second ``Content-Length``); httpx cannot send other characters at all.
    """
    if _FORBIDDEN.isdisjoint(name) and _FORBIDDEN.isdisjoint(value):
        if (name + value).isascii():
            return
        # httpx sends header values as ASCII: anything else would fail as a traceback.
        raise InvalidRequestError(
            f"The HTTP header {name!r} has a character that is not ASCII in its "
            f"{'name' if not name.isascii() else 'value'} (a curly quote or a non-breaking "
            "space pasted from a web page?), which no header can carry. Write it again in "
            "plain ASCII in the headers you configured.",
            provider=context.code_name if context else None,
        )
    where = "name" if not _FORBIDDEN.isdisjoint(name) else "value"
    raise InvalidRequestError(
        f"The HTTP header {name!r} has a line break or NUL character in its {where}, "
        "which would corrupt the request. Remove it from the headers you configured "
        "(an API key or extra header copied with its newline, for example).",
        provider=context.code_name if context else None,
    )


def split_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@``, and the Basic ``Authorization`` they make."""
    try:
        parts = urlsplit(url)
    except ValueError:
        # Not a URL the parser takes (the request says so, in words): it keeps no
        # credentials all the same, so none can reach a message.
        scheme, separator, rest = url.partition("://")
        authority, slash, path = rest.partition("/")
        if separator and "@" in authority:
            url = f"{scheme}{separator}{authority.rpartition('@')[2]}{slash}{path}"
        return url, None
    if parts.username is None and parts.password is None:
        return url, None
    # The host and port as written (a port out of range is refused later, in words).
    netloc = parts.netloc.rpartition("@")[2]
    user = unquote(parts.username or "")
    password = unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return urlunsplit(parts._replace(netloc=netloc)), f"Basic {token}"


def without_userinfo(url: str) -> str:
    """``url`` without its ``user:password@`` (for messages and reprs)."""
    return split_credentials(url)[0]
