"""Settings every HTTP provider reads the same way: a base URL, a number of seconds."""

from __future__ import annotations

import ipaddress
import math
from urllib.parse import urlsplit

from ollm.errors import InvalidRequestError

__all__ = ["check_base_url", "is_loopback", "seconds_setting"]


def check_base_url(url: str, setting: str, example: str) -> str:
    """``url`` without a trailing ``/``, or ``InvalidRequestError`` naming ``setting``.

    It must be ``http://`` or ``https://`` with a host and, if any, a port in 1-65535;
    ``example`` is shown as the shape to use.
    """
    url = url.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:  # brackets that hold no IPv6 address, or are not closed
        raise InvalidRequestError(
            f"{url!r} ({setting}) is not a valid address ({exc}). Use the server's base URL, "
            f"for example {example}."
        ) from None
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidRequestError(
            f"{url!r} ({setting}) is not an http:// or https:// address. Use the server's "
            f"base URL, for example {example}."
        )
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise InvalidRequestError(
            f"{url!r} ({setting}) has a port that is not between 1 and 65535."
        )
    return url


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine (no proxy is ever used for it)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def seconds_setting(
    argument: float | None, text: str | None, variable: str, default: float
) -> float:
    """A positive number of seconds: the argument, else the variable's ``text``, else
    ``default``; ``InvalidRequestError`` naming where a bad value came from."""
    if argument is not None:
        value = float(argument)
        where = "the timeout argument"
    elif text:
        try:
            value = float(text)
        except ValueError:
            raise InvalidRequestError(
                f"{variable} is {text!r}; it must be a number of seconds, such as 600."
            ) from None
        where = variable
    else:
        return default
    if not value > 0 or math.isnan(value):
        raise InvalidRequestError(f"{where} is {value}; it must be a positive number of seconds.")
    return value
