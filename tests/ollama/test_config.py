"""Configuration: the host table of the official client, env precedence, timeouts, proxies."""

from __future__ import annotations

import json
from typing import Any

import pytest

import ollm
from ollm_ollama import OllamaProvider, parse_host

pytestmark = pytest.mark.anyio

RawConnection = Any  # conftest.RawConnection
RawRequest = Any  # conftest.RawRequest
RawServer = Any  # conftest.RawServer (the `raw_server` fixture)

# The doctests of ollama-python's _parse_host (ollama-wire.md section 7), row by row.
OFFICIAL_TABLE = [
    (None, "http://127.0.0.1:11434"),
    ("", "http://127.0.0.1:11434"),
    ("1.2.3.4", "http://1.2.3.4:11434"),
    (":56789", "http://127.0.0.1:56789"),
    ("1.2.3.4:56789", "http://1.2.3.4:56789"),
    ("http://1.2.3.4", "http://1.2.3.4:80"),
    ("https://1.2.3.4", "https://1.2.3.4:443"),
    ("https://1.2.3.4:56789", "https://1.2.3.4:56789"),
    ("example.com", "http://example.com:11434"),
    ("example.com:56789", "http://example.com:56789"),
    ("http://example.com", "http://example.com:80"),
    ("https://example.com", "https://example.com:443"),
    ("https://example.com:56789", "https://example.com:56789"),
    ("example.com/", "http://example.com:11434"),
    ("example.com:56789/", "http://example.com:56789"),
    ("example.com/path", "http://example.com:11434/path"),
    ("example.com:56789/path", "http://example.com:56789/path"),
    ("https://example.com:56789/path", "https://example.com:56789/path"),
    ("example.com:56789/path/", "http://example.com:56789/path"),
    ("[0001:002:003:0004::1]", "http://[0001:002:003:0004::1]:11434"),
    ("[0001:002:003:0004::1]:56789", "http://[0001:002:003:0004::1]:56789"),
    ("http://[0001:002:003:0004::1]", "http://[0001:002:003:0004::1]:80"),
    ("https://[0001:002:003:0004::1]", "https://[0001:002:003:0004::1]:443"),
    ("https://[0001:002:003:0004::1]:56789", "https://[0001:002:003:0004::1]:56789"),
    ("[0001:002:003:0004::1]/", "http://[0001:002:003:0004::1]:11434"),
    ("[0001:002:003:0004::1]:56789/", "http://[0001:002:003:0004::1]:56789"),
    ("[0001:002:003:0004::1]/path", "http://[0001:002:003:0004::1]:11434/path"),
    ("[0001:002:003:0004::1]:56789/path", "http://[0001:002:003:0004::1]:56789/path"),
    ("https://[0001:002:003:0004::1]:56789/path", "https://[0001:002:003:0004::1]:56789/path"),
    ("[0001:002:003:0004::1]:56789/path/", "http://[0001:002:003:0004::1]:56789/path"),
]


@pytest.mark.parametrize(("raw", "expected"), OFFICIAL_TABLE)
def test_hosts_parse_as_the_official_client_parses_them(raw: str | None, expected: str) -> None:
    assert parse_host(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:11435", "http://127.0.0.1:11435"),
        ("http://0.0.0.0:8080", "http://127.0.0.1:8080"),
        ("::", "http://[::1]:11434"),
        ("[::]", "http://[::1]:11434"),
        ("[::]:11435", "http://[::1]:11435"),
        ("::1", "http://[::1]:11434"),
        ("  localhost:11434  ", "http://localhost:11434"),
    ],
)
def test_bind_addresses_become_loopback(raw: str, expected: str) -> None:
    """A server's OLLAMA_HOST=0.0.0.0 must not make the client connect to 0.0.0.0."""
    assert parse_host(raw) == expected


@pytest.mark.parametrize("raw", ["example.com:port", "http://[::1"])
def test_a_malformed_host_is_an_invalid_request_naming_it(raw: str) -> None:
    with pytest.raises(ollm.InvalidRequestError, match="not a valid Ollama host"):
        parse_host(raw)


def test_explicit_argument_then_environment_then_default() -> None:
    env = {
        "OLLAMA_HOST": "example.com:1234",
        "OLLM_OLLAMA_TIMEOUT": "42",
        "OLLM_OLLAMA_CONNECT_TIMEOUT": "3",
    }
    from_env = OllamaProvider(environ=env)
    assert from_env.host == "http://example.com:1234"
    assert from_env.config.timeout == 42.0
    assert from_env.config.connect_timeout == 3.0

    explicit = OllamaProvider("other:99", timeout=7, connect_timeout=1.5, environ=env)
    assert explicit.host == "http://other:99"
    assert explicit.config.timeout == 7.0
    assert explicit.config.connect_timeout == 1.5

    default = OllamaProvider(environ={})
    assert default.host == "http://127.0.0.1:11434"
    # Long enough for a cold model load; a connect that fails, fails fast.
    assert default.config.timeout == 300.0
    assert default.config.connect_timeout == 5.0


def test_the_environment_is_read_when_the_provider_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "first:1")
    first = OllamaProvider()
    monkeypatch.setenv("OLLAMA_HOST", "second:2")
    second = OllamaProvider()
    assert (first.host, second.host) == ("http://first:1", "http://second:2")


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"OLLM_OLLAMA_TIMEOUT": "soon"}, "OLLM_OLLAMA_TIMEOUT is 'soon'; it must be a number"),
        ({"OLLM_OLLAMA_TIMEOUT": "-5"}, "must be a positive number"),
        ({"OLLM_OLLAMA_CONNECT_TIMEOUT": "0"}, "must be a positive number"),
    ],
)
def test_bad_timeouts_in_the_environment_say_which_variable(
    env: dict[str, str], match: str
) -> None:
    with pytest.raises(ollm.InvalidRequestError, match=match):
        OllamaProvider(environ=env)


def test_bad_explicit_values_are_refused() -> None:
    with pytest.raises(
        ollm.InvalidRequestError, match="the timeout argument is 'soon'; it must be a number"
    ):
        OllamaProvider(timeout="soon", environ={})  # type: ignore[arg-type]
    with pytest.raises(ollm.InvalidRequestError, match="keep_alive must be"):
        OllamaProvider(keep_alive=True, environ={})


async def test_api_key_and_headers_are_sent(raw_server: RawServer, http_stack: str) -> None:
    def version(conn: RawConnection, request: RawRequest) -> None:
        conn.respond(200, b'{"version":"0.12.10"}')

    raw_server.routes["/api/version"] = version
    env = {"OLLAMA_API_KEY": "sekret"}
    async with OllamaProvider(
        raw_server.url, http=http_stack, headers={"X-Team": "a"}, environ=env
    ) as provider:
        assert await provider.version() == "0.12.10"
    headers = raw_server.requests[-1].headers
    assert headers["authorization"] == "Bearer sekret"
    assert headers["x-team"] == "a"
    assert headers["user-agent"].startswith("ollm/")
    assert headers["content-type"] == "application/json"


async def test_an_explicit_authorization_header_wins_over_the_api_key(
    raw_server: RawServer, http_stack: str
) -> None:
    raw_server.routes["/api/version"] = lambda conn, request: conn.respond(200, b"{}")
    async with OllamaProvider(
        raw_server.url,
        http=http_stack,
        headers={"Authorization": "Basic abc"},
        environ={"OLLAMA_API_KEY": "k"},
    ) as provider:
        await provider.version()
    assert raw_server.requests[-1].headers["authorization"] == "Basic abc"


async def test_proxies_from_the_environment_never_apply_to_loopback(
    raw_server: RawServer,
    closed_port: str,
    monkeypatch: pytest.MonkeyPatch,
    http_stack: str,
) -> None:
    """ollama-python#424: HTTP_PROXY sent localhost traffic through the proxy."""
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, closed_port)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    raw_server.routes["/api/version"] = lambda conn, request: conn.respond(200, b'{"version":"1"}')
    async with OllamaProvider(raw_server.url, http=http_stack, environ={}) as provider:
        assert await provider.version() == "1"


async def test_proxies_from_the_environment_apply_to_remote_hosts(
    raw_server: RawServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The raw server plays the proxy: it receives the absolute URL of the remote server.
    monkeypatch.setenv("HTTP_PROXY", raw_server.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("all_proxy", raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)
    raw_server.routes["http://ollama.example:11434/api/version"] = lambda conn, request: (
        conn.respond(200, json.dumps({"version": "via-proxy"}).encode())
    )
    async with OllamaProvider("ollama.example", environ={}) as provider:
        assert await provider.version() == "via-proxy"
    assert raw_server.requests[-1].target == "http://ollama.example:11434/api/version"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("localhost:99999", "port must be a number from 1 to 65535"),
        ("127.0.0.1:0", "port must be a number from 1 to 65535"),
        # An empty port is a mistake, not a wish for the default one.
        ("127.0.0.1:", "the port after ':' is empty"),
        ("http://ollama.example:/v1", "the port after ':' is empty"),
        ("http://", "no host name"),
        ("https:///", "no host name"),
        ("ftp://example.com", "scheme 'ftp'"),
    ],
)
def test_a_bad_ollama_host_names_the_variable_and_the_value(raw: str, reason: str) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        OllamaProvider(environ={"OLLAMA_HOST": raw})
    message = str(caught.value)
    assert message.startswith(f"OLLAMA_HOST={raw!r} is not a valid Ollama host: ")
    assert reason in message
    assert ".." not in message
    with pytest.raises(ollm.InvalidRequestError, match=r"^host="):
        OllamaProvider(raw, environ={})


def test_credentials_in_ollama_host_become_basic_auth_and_leave_the_url() -> None:
    provider = OllamaProvider(environ={"OLLAMA_HOST": "https://alice:s%40cret@ollama.example:443"})
    assert provider.host == "https://ollama.example:443"
    # base64("alice:s@cret")
    assert provider.http.config.headers["Authorization"] == "Basic YWxpY2U6c0BjcmV0"
    keyed = OllamaProvider(environ={"OLLAMA_HOST": "http://alice:pw@h:1", "OLLAMA_API_KEY": "sk-1"})
    assert keyed.http.config.headers["Authorization"] == "Bearer sk-1"  # an explicit key wins
