"""Settings every HTTP provider reads the same way, refused in the same words.

A base URL, a number of seconds, the HTTP stack, an API key: each from an argument, else
an environment variable (or a profile), else a default; a bad value is an
``InvalidRequestError`` that names where it came from, and never shows a key.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from ollm.errors import InvalidRequestError
from ollm_http._config import ErrorContext, HTTPConfig, Limits, Timeouts, split_credentials

__all__ = [
    "ServerSettings",
    "ServerSetup",
    "Stack",
    "affinity_setting",
    "check_base_url",
    "credentials_header",
    "display_url",
    "is_loopback",
    "seconds_setting",
    "secret_setting",
    "stack_setting",
]

Stack = Literal["builtin", "httpx"]
"""What carries the requests: ollm's own HTTP/1.1 transport, or httpx's own stack."""

STACKS: tuple[Stack, ...] = ("builtin", "httpx")


@dataclass(frozen=True)
class ServerSetup:
    """How a provider names and defaults its server's settings: the setting of its address
    (``OLLAMA_HOST``) and an ``example`` of one, the ``prefix`` of its variables
    (``OLLM_OLLAMA``: ``OLLM_OLLAMA_TIMEOUT``...), its default timeouts in seconds, and
    whether ``check_base_url`` checks the address (not when the provider has its own rules,
    as Ollama's host has)."""

    url_setting: str
    example: str
    prefix: str
    timeout: float
    connect_timeout: float
    check_url: bool = True


@dataclass(frozen=True)
class ServerSettings:
    """Where a provider's server is and how to reach it, read the same way by every provider.

    A provider's own configuration extends it (``OllamaConfig``, ``OpenAIConfig``,
    ``GeminiConfig`` do) and builds it with ``read``; ``http_config`` then gives the
    ``HTTPConfig`` of its ``HTTPProvider``. ``base_url`` holds no credentials (a
    ``user:secret@`` in the setting becomes ``credentials``, a Basic ``Authorization``);
    the credentials and ``headers`` (the user's own, which may carry keys: they are
    treated as secret) are never in the ``repr``. ``affinity_header`` names a header
    that carries each chat request's conversation id (``x-session-id``...), for a router
    that keeps a conversation on one server; ``None`` (the default) sends none.
    """

    base_url: str
    timeout: float = 300.0
    connect_timeout: float = 10.0
    http: Stack = "builtin"
    verify: bool | str = True
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    credentials: str | None = field(default=None, repr=False)
    affinity_header: str | None = None

    @staticmethod
    def read(
        url: str,
        setup: ServerSetup,
        environ: Mapping[str, str],
        *,
        timeout: object = None,
        connect_timeout: object = None,
        http: object = None,
        verify: bool | str | None = None,
        headers: Mapping[str, str] | None = None,
        affinity_header: object = None,
    ) -> ServerSettings:
        """Each setting from its argument, else ``PREFIX_TIMEOUT``, ``PREFIX_CONNECT_TIMEOUT``,
        ``PREFIX_HTTP`` and ``PREFIX_AFFINITY_HEADER`` in ``environ`` (``setup`` names the
        prefix), else ``setup``'s defaults; every bad value refused in the same words
        (``check_base_url``, ``seconds_setting``, ``stack_setting``, ``affinity_setting``)."""
        if setup.check_url:
            url = check_base_url(url, setup.url_setting, setup.example)
        prefix = setup.prefix
        return ServerSettings(
            base_url=display_url(url),
            credentials=credentials_header(url),
            timeout=seconds_setting(
                timeout, environ.get(f"{prefix}_TIMEOUT"), f"{prefix}_TIMEOUT", setup.timeout
            ),
            connect_timeout=seconds_setting(
                connect_timeout,
                environ.get(f"{prefix}_CONNECT_TIMEOUT"),
                f"{prefix}_CONNECT_TIMEOUT",
                setup.connect_timeout,
                name="connect_timeout",
            ),
            http=stack_setting(http, environ.get(f"{prefix}_HTTP"), f"{prefix}_HTTP"),
            verify=True if verify is None else verify,
            headers=dict(headers or {}),
            affinity_header=affinity_setting(
                affinity_header,
                environ.get(f"{prefix}_AFFINITY_HEADER"),
                f"{prefix}_AFFINITY_HEADER",
            ),
        )

    def settings(self) -> dict[str, Any]:
        """These fields by name, for a provider's configuration built from them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(ServerSettings)}

    @property
    def loopback(self) -> bool:
        """Whether the server is on this machine (no proxy is ever used for it)."""
        return is_loopback(self.base_url)

    def http_config(
        self,
        *,
        agent: str,
        context: ErrorContext,
        headers: Mapping[str, str] | None = None,
        limits: Limits | None = None,
    ) -> HTTPConfig:
        """The ``HTTPConfig`` for these settings: ``User-Agent: agent``, JSON asked for,
        ``headers`` (the provider's: its key...), the credentials of the URL as
        ``Authorization`` unless one is set, and the user's own ``headers``, secret."""
        sent = {"User-Agent": agent, "Accept": "application/json", **(headers or {})}
        if self.credentials and not any(k.lower() == "authorization" for k in sent):
            sent["Authorization"] = self.credentials
        sent.update(self.headers)
        return HTTPConfig(
            self.base_url,
            headers=sent,
            timeouts=Timeouts.uniform(self.connect_timeout, self.timeout),
            limits=limits or Limits(),
            verify=self.verify,
            trust_env=not self.loopback,
            context=context,
            secret_headers=tuple(self.headers),
            affinity_header=self.affinity_header,
        )


def check_base_url(url: str, setting: str, example: str) -> str:
    """``url`` without a trailing ``/``, or ``InvalidRequestError`` naming ``setting``.

    It must be ``http://`` or ``https://`` with a host and, if any, a port in 1-65535,
    and no query or fragment (paths are appended to it: ``?`` or ``#`` would swallow
    them); ``example`` is shown as the shape to use. Credentials in it
    (``user:secret@``) never appear in a message.
    """
    url = url.strip().rstrip("/")
    shown = display_url(url)
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:  # brackets that hold no IPv6 address, or are not closed
        raise InvalidRequestError(
            f"{shown!r} ({setting}) is not a valid address ({exc}). Use the server's base URL, "
            f"for example {example}."
        ) from None
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidRequestError(
            f"{shown!r} ({setting}) is not an http:// or https:// address. Use the server's "
            f"base URL, for example {example}."
        )
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise InvalidRequestError(
            f"{shown!r} ({setting}) has a port that is not between 1 and 65535."
        )
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise InvalidRequestError(
            f"{shown!r} ({setting}) has a query or a fragment ('?' or '#'), which would swallow "
            f"the paths ollm adds to it. Use the server's base URL alone, for example {example}."
        )
    return url


def display_url(url: str) -> str:
    """``url`` as messages, reprs and logs show it: without ``user:password@``."""
    return split_credentials(url)[0]


def credentials_header(url: str) -> str | None:
    """The ``Authorization: Basic`` value for ``user:password@`` in ``url``, if it has any."""
    return split_credentials(url)[1]


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine (no proxy is ever used for it)."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def seconds_setting(
    argument: object, text: str | None, variable: str, default: float, *, name: str = "timeout"
) -> float:
    """A positive number of seconds: the ``name`` argument, else the variable's ``text``,
    else ``default``; ``InvalidRequestError`` naming where a bad value came from.

    ``math.inf`` waits forever. A ``bool`` or a string is not a number of seconds.
    """
    if argument is not None:
        where = f"the {name} argument"
        if isinstance(argument, bool) or not isinstance(argument, (int, float)):
            raise InvalidRequestError(
                f"{where} is {argument!r}; it must be a number of seconds, such as {default:g}."
            )
        value = float(argument)
    elif text is not None and text.strip():
        where = variable
        try:
            value = float(text.strip())
        except ValueError:
            raise InvalidRequestError(
                f"{variable} is {text!r}; it must be a number of seconds, such as {default:g}."
            ) from None
    else:
        return default
    if not value > 0 or math.isnan(value):
        raise InvalidRequestError(f"{where} is {value}; it must be a positive number of seconds.")
    return value


def stack_setting(argument: object, text: str | None, variable: str) -> Stack:
    """``"builtin"`` or ``"httpx"`` (any case): the ``http`` argument, else the variable's
    ``text``, else ``"builtin"``; ``InvalidRequestError`` naming where a bad value came from."""
    if argument is not None:
        where, value = "the http argument", argument
    elif text is not None and text.strip():
        where, value = variable, text
    else:
        return "builtin"
    chosen = value.strip().lower() if isinstance(value, str) else value
    for stack in STACKS:
        if chosen == stack:
            return stack
    raise InvalidRequestError(
        f"{where} is {value!r}; use 'builtin' (ollm's own HTTP/1.1 transport, the fast "
        "default) or 'httpx' (httpx's own stack)."
    )


# A header's name is an HTTP token (RFC 9110, 5.6.2).
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def affinity_setting(argument: object, text: str | None, variable: str) -> str | None:
    """The name of the header that carries a request's affinity key: the
    ``affinity_header`` argument, else the variable's ``text``, else ``None`` (no header);
    ``InvalidRequestError`` naming where a name that no header can have came from."""
    if argument is not None:
        where, value = "the affinity_header argument", argument
    elif text is not None and text.strip():
        where, value = variable, text
    else:
        return None
    name = value.strip() if isinstance(value, str) else value
    if not isinstance(name, str) or not name or not _TOKEN.issuperset(name):
        raise InvalidRequestError(
            f"{where} is {value!r}, which is not the name of an HTTP header. Use letters, "
            "digits and '-', for example x-session-id."
        )
    return name


def secret_setting(value: str | None, setting: str) -> str | None:
    """An API key (or another secret sent in a header), stripped; ``None`` when empty.

    A key with a character that cannot travel in an HTTP header (a curly quote or a
    non-breaking space pasted from a web page, a control character) is an
    ``InvalidRequestError`` naming ``setting`` and the character, never the key.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequestError(f"{setting} must be a string, not a {type(value).__name__}.")
    key = value.strip()
    for position, char in enumerate(key, 1):
        if not " " <= char <= "~":
            import unicodedata

            name = unicodedata.name(char, "a control character")
            raise InvalidRequestError(
                f"{setting} holds a character that cannot be sent in an HTTP header: "
                f"U+{ord(char):04X} ({name}) at position {position}. API keys are plain "
                "ASCII: copy the key again, without quotes or spaces around it."
            )
    return key or None
