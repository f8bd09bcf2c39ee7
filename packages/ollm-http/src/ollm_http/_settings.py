"""Settings every HTTP provider reads the same way, refused in the same words.

A base URL, a number of seconds, the HTTP stack, an API key: each from an argument, else
an environment variable (or a profile), else a default; a bad value is an
``InvalidRequestError`` that names where it came from, and never shows a key.
"""

from __future__ import annotations

import ipaddress
import math
from typing import Literal
from urllib.parse import urlsplit

from ollm.errors import InvalidRequestError
from ollm_http._config import split_credentials

__all__ = [
    "Stack",
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
