"""Where the Ollama server is and how long to wait for it: argument, environment, default.

Everything is resolved once, in ``OllamaConfig.resolve``, from explicit arguments first,
then the environment mapping it is given (``os.environ`` by default, read when the
provider is built, never at import), then the defaults.
"""

from __future__ import annotations

import base64
import ipaddress
import math
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ollm.errors import InvalidRequestError
from ollm_http import (
    ServerSettings,
    ServerSetup,
    Stack,  # noqa: F401  (the inherited fields' annotations name it)
    is_loopback,
    secret_setting,
)

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_TIMEOUT",
    "ENV_API_KEY",
    "ENV_CONNECT_TIMEOUT",
    "ENV_HOST",
    "ENV_HTTP",
    "ENV_TIMEOUT",
    "KeepAlive",
    "OllamaConfig",
    "is_loopback",
    "normalize_keep_alive",
    "parse_host",
]

ENV_HOST = "OLLAMA_HOST"
ENV_TIMEOUT = "OLLM_OLLAMA_TIMEOUT"
ENV_CONNECT_TIMEOUT = "OLLM_OLLAMA_CONNECT_TIMEOUT"
ENV_API_KEY = "OLLAMA_API_KEY"
ENV_HTTP = "OLLM_OLLAMA_HTTP"

DEFAULT_PORT = 11434
DEFAULT_HOST = f"http://127.0.0.1:{DEFAULT_PORT}"
# A cold load of a large model can take minutes before the first byte arrives.
DEFAULT_TIMEOUT = 300.0
DEFAULT_CONNECT_TIMEOUT = 5.0

KeepAlive = float | int | str
"""Seconds as a number (negative: keep loaded forever), or a Go duration (``"10m"``)."""


def parse_host(host: str | None, *, source: str = "host") -> str:
    """The base URL for ``host``, read as the official Python client reads ``OLLAMA_HOST``.

    ``None`` or ``""`` give ``http://127.0.0.1:11434``; a bare host or ``:port`` gets
    ``http`` and port 11434; a scheme without a port gets 80 or 443; a path is kept
    without its slashes. Unlike that client, and like the ``ollama`` command line, an
    unspecified bind address (``0.0.0.0``, ``::``) becomes loopback (``127.0.0.1``,
    ``[::1]``): a server listens there, a client cannot connect there on every system.
    A bare IPv6 address (``::1``) is accepted as if it were in brackets. Credentials
    (``user:secret@``) are left out of the URL: ``host_authorization`` turns them into
    a header, so they never appear in a message or a log.

    A port outside 1-65535 (``localhost:99999``, ``:0``) or a scheme with no host
    (``http://``) is an ``InvalidRequestError`` naming ``source`` (``OLLAMA_HOST`` when
    the value came from there) and the value.
    """
    raw = (host or "").strip()
    port = DEFAULT_PORT
    scheme, sep, hostport = raw.partition("://")
    if not sep:
        scheme, hostport = "http", raw
    elif scheme == "http":
        port = 80
    elif scheme == "https":
        port = 443
    else:
        raise _bad_host(host, source, f"the scheme {scheme!r} is not http or https")
    if sep and not hostport.strip("/"):
        raise _bad_host(host, source, "it has no host name after the scheme")
    hostport = _bracket_bare_ipv6(_without_userinfo(hostport))
    if hostport.partition("/")[0].endswith(":"):
        raise _bad_host(host, source, "the port after ':' is empty")
    try:
        split = urllib.parse.urlsplit(f"{scheme}://{hostport}")
        hostname = split.hostname or "127.0.0.1"
        given_port = split.port
    except ValueError as exc:
        reason = (
            "the port must be a number from 1 to 65535" if "port" in str(exc).lower() else str(exc)
        )
        raise _bad_host(host, source, reason) from None
    if given_port is not None:
        if given_port == 0:
            raise _bad_host(host, source, "the port must be a number from 1 to 65535")
        port = given_port
    try:
        address = ipaddress.ip_address(hostname)
    except ValueError:
        address = None
    if address is not None:
        if address.is_unspecified:
            hostname = "127.0.0.1" if address.version == 4 else "::1"
        if address.version == 6:
            hostname = f"[{hostname}]"
    path = split.path.strip("/")
    if path:
        return f"{scheme}://{hostname}:{port}/{path}"
    return f"{scheme}://{hostname}:{port}"


def _bad_host(host: str | None, source: str, reason: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"{source}={host!r} is not a valid Ollama host: {reason}. Use a form such as "
        "127.0.0.1:11434, http://example.com:11434 or https://example.com.",
        provider="ollama",
    )


def _without_userinfo(hostport: str) -> str:
    authority, slash, rest = hostport.partition("/")
    if "@" in authority:
        authority = authority.rpartition("@")[2]
    return authority + slash + rest


def host_authorization(host: str | None) -> str | None:
    """The ``Authorization: Basic`` value for credentials in ``host``, if it has any."""
    raw = (host or "").strip()
    authority = raw.partition("://")[2] if "://" in raw else raw
    authority = authority.partition("/")[0]
    if "@" not in authority:
        return None
    userinfo = authority.rpartition("@")[0]
    user, _, password = userinfo.partition(":")
    pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    return "Basic " + base64.b64encode(pair.encode()).decode("ascii")


def _bracket_bare_ipv6(hostport: str) -> str:
    """``::1`` or ``::`` -> ``[::1]``, ``[::]``; anything else unchanged."""
    if hostport.startswith("[") or hostport.count(":") < 2:
        return hostport
    address, slash, rest = hostport.partition("/")
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return hostport
    return f"[{address}]{slash}{rest}"


def normalize_keep_alive(value: object, *, source: str = "keep_alive") -> KeepAlive | None:
    """A ``keep_alive`` value the server accepts, or ``None`` to leave its default.

    Numbers are seconds. A string is a Go duration; a string that is only a number
    (``"-1"``, ``"300"``) is sent as that number, because Go rejects a duration
    without a unit, and ``"-1"`` is the usual way to ask for "forever".
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidRequestError(_keep_alive_help(source, value))
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            raise InvalidRequestError(_keep_alive_help(source, value))
        return int(value) if value.is_integer() and math.isfinite(value) else value
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            number = float(text)
        except ValueError:
            return text
        return normalize_keep_alive(number, source=source)
    raise InvalidRequestError(_keep_alive_help(source, value))


def _keep_alive_help(source: str, value: object) -> str:
    return (
        f"{source} must be a number of seconds (-1 keeps the model loaded, 0 unloads it "
        f'at once) or a duration such as "10m", not {value!r}.'
    )


# Ollama's host has rules of its own (parse_host): it is checked there.
SETUP = ServerSetup(
    ENV_HOST, DEFAULT_HOST, "OLLM_OLLAMA", DEFAULT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, check_url=False
)


@dataclass(frozen=True)
class OllamaConfig(ServerSettings):
    """The resolved settings of one provider.

    The server's address (``host``, the same as ``base_url``), timeouts, HTTP stack and
    headers are ``ollm_http``'s ``ServerSettings``, read as every provider reads them;
    ``api_key`` (``OLLAMA_API_KEY``) is never in the ``repr``.
    """

    base_url: str = DEFAULT_HOST
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    keep_alive: KeepAlive | None = None
    api_key: str | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        """The server's base URL, for example ``http://127.0.0.1:11434``."""
        return self.base_url

    @classmethod
    def resolve(
        cls,
        host: str | None = None,
        *,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        keep_alive: KeepAlive | None = None,
        headers: Mapping[str, str] | None = None,
        http: str | None = None,
        affinity_header: str | None = None,
        environ: Mapping[str, str],
    ) -> OllamaConfig:
        """Explicit arguments, then ``environ``, then the defaults."""
        source = "host"
        if host is None:
            host = environ.get(ENV_HOST) or None
            source = ENV_HOST
        given: dict[str, Any] = {
            "timeout": timeout,
            "connect_timeout": connect_timeout,
            "http": http,
            "affinity_header": affinity_header,
        }
        server = ServerSettings.read(parse_host(host, source=source), SETUP, environ, **given)
        settings = server.settings()
        # A bare host with credentials (user:secret@host) is Ollama's own form.
        settings["credentials"] = host_authorization(host)
        settings["headers"] = dict(headers or {})
        return cls(
            **settings,
            keep_alive=normalize_keep_alive(keep_alive),
            api_key=secret_setting(environ.get(ENV_API_KEY), ENV_API_KEY),
        )
