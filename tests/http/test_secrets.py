"""No credential in any message, repr or log line of ollm-http.

A secret in the URL's userinfo, in headers known to carry credentials and in one the
config marks as secret; every failure ollm-http maps, over real sockets on 127.0.0.1,
on asyncio and trio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from leaks import assert_not_shown, error_texts, logged, secrets
from raw_http import CLOSE, HANG, ok, raw_server

import ollm
from ollm_http import ErrorContext, HTTPClient, HTTPConfig, Timeouts, is_secret_header

CONTEXT = ErrorContext(provider="The test server", code_name="test", url_setting="TEST_URL")


def config(url: str, secret: str, **settings: object) -> HTTPConfig:
    return HTTPConfig(
        url,
        headers={
            "x-goog-api-key": secret,
            "api-key": secret,
            "X-Tenant": secret,
            "User-Agent": "ollm-test",
        },
        secret_headers=("x-tenant",),
        context=CONTEXT,
        **settings,  # type: ignore[arg-type]
    )


def with_userinfo(url: str, secret: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://alice:{secret}@{rest}"


def moved(location: str) -> bytes:
    return b"HTTP/1.1 307 Moved\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % location.encode()


@asynccontextmanager
async def plain_http_on_a_tls_address() -> AsyncIterator[str]:
    """A server that answers plain HTTP at once, for an https:// address: TLS fails."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def answer(stream: anyio.abc.ByteStream) -> None:
        async with stream:
            await stream.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    async with anyio.create_task_group() as group:
        group.start_soon(listener.serve, answer)
        yield f"https://127.0.0.1:{port}"
        group.cancel_scope.cancel()


Scenario = Callable[[str, list[str]], Awaitable[str]]


async def _attempt(http: HTTPClient, shown: list[str], *, lines: bool = False) -> None:
    """One request that fails; what it shows goes to ``shown``."""
    shown += [repr(http), repr(http.config)]
    try:
        async with http.stream("POST", "/v1/chat", json={"messages": ["hi"]}) as reply:
            shown.append(repr(reply))
            if lines:
                async for _line in reply.lines():
                    pass
            else:
                await reply.aread()
    except ollm.OllmError as exc:
        shown += error_texts(exc)
        return
    finally:
        await http.aclose()
    raise AssertionError("the request did not fail")


async def refused(secret: str, shown: list[str]) -> str:
    await _attempt(HTTPClient(config(with_userinfo("http://127.0.0.1:1", secret), secret)), shown)
    return "CONNECTION_FAILED"


async def timeout(secret: str, shown: list[str]) -> str:
    async with raw_server([HANG]) as server:
        url = with_userinfo(server.url, secret)
        await _attempt(HTTPClient(config(url, secret, timeouts=Timeouts(read=0.01))), shown)
    return "TIMEOUT"


async def bad_http(secret: str, shown: list[str]) -> str:
    async with raw_server([(b"SPEAK FRIEND\r\n\r\n", CLOSE)]) as server:
        await _attempt(HTTPClient(config(with_userinfo(server.url, secret), secret)), shown)
    return "BAD_RESPONSE"


async def refused_redirect(secret: str, shown: list[str]) -> str:
    async with raw_server([ok()]) as other:
        # The server names credentials in the address too: they are not shown either.
        location = f"http://bob:{secret}@127.0.0.1:{other.port}/next"
        async with raw_server([moved(location)]) as server:
            await _attempt(HTTPClient(config(with_userinfo(server.url, secret), secret)), shown)
    return "BAD_RESPONSE"


async def tls(secret: str, shown: list[str]) -> str:
    async with plain_http_on_a_tls_address() as url:
        await _attempt(HTTPClient(config(with_userinfo(url, secret), secret)), shown)
    return "TLS_ERROR"


async def interrupted(secret: str, shown: list[str]) -> str:
    cut = (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}\n{}\n", CLOSE)
    async with raw_server([cut]) as server:
        url = with_userinfo(server.url, secret)
        await _attempt(HTTPClient(config(url, secret)), shown, lines=True)
    return "STREAM_INTERRUPTED"


async def bad_url(secret: str, shown: list[str]) -> str:
    await _attempt(
        HTTPClient(config(with_userinfo("http://127.0.0.1:99999", secret), secret)), shown
    )
    return "INVALID_REQUEST"


async def unreadable_body(secret: str, shown: list[str]) -> str:
    async with raw_server([ok(b"\x00\x01", extra=b"Content-Encoding: br\r\n")]) as server:
        await _attempt(HTTPClient(config(with_userinfo(server.url, secret), secret)), shown)
    return "BAD_RESPONSE"


SCENARIOS: list[Scenario] = [
    refused,
    timeout,
    bad_http,
    refused_redirect,
    tls,
    interrupted,
    bad_url,
    unreadable_body,
]


@given(secrets(), st.sampled_from(SCENARIOS), st.sampled_from(["asyncio", "trio"]))
def test_a_secret_never_shows_in_a_message_a_repr_or_a_log_line(
    secret: str, scenario: Scenario, backend: str
) -> None:
    shown: list[str] = []
    with logged("ollm_http", "httpx", "httpcore") as lines:
        code = anyio.run(scenario, secret, shown, backend=backend)
    assert any(code in text for text in shown), f"expected {code} in {shown}"
    assert_not_shown(secret, [*shown, *lines])


@pytest.mark.parametrize(
    "name",
    [
        *("Authorization", "proxy-authorization", "Cookie", "X-Goog-Api-Key", "api-key"),
        *("x-api-key", "X-Auth-Token", "Ocp-Apim-Subscription-Key", "X-Session-Id"),
        "x-client-secret",
    ],
)
def test_credential_headers_are_secret_by_name(name: str) -> None:
    assert is_secret_header(name)


@pytest.mark.parametrize(
    "name", ["User-Agent", "Accept", "Content-Type", "OpenAI-Organization", "Keep-Alive"]
)
def test_other_headers_are_not(name: str) -> None:
    assert not is_secret_header(name)
    assert HTTPConfig("http://h", secret_headers=[name.upper()]).is_secret(name)


def test_reprs_hide_secret_values_and_the_urls_credentials() -> None:
    made = HTTPConfig(
        "http://alice:pw-123@127.0.0.1:8000/v1",
        headers={"Authorization": "Bearer sk-1", "X-Tenant": "t-1", "User-Agent": "agent"},
        secret_headers=["x-tenant"],
    )
    assert repr(made).startswith(
        "HTTPConfig(base_url='http://127.0.0.1:8000/v1', headers={'Authorization': '<secret>', "
        "'X-Tenant': '<secret>', 'User-Agent': 'agent'}, timeouts=Timeouts("
    )
    assert repr(HTTPClient(made)) == "HTTPClient('http://127.0.0.1:8000/v1', stack='builtin')"


@pytest.mark.anyio
async def test_a_reply_shows_its_status_and_address_only() -> None:
    async with raw_server([ok()]) as server:
        http = HTTPClient(HTTPConfig(with_userinfo(server.url, "pw-123")))
        reply = await http.request("GET", "/models")
        assert repr(reply) == f"<Reply 200 to GET {server.url}/models>"
        await http.aclose()
