"""Redirects never carry a secret or a conversation to another server.

Two real servers on 127.0.0.1 (two ports: two origins), on asyncio and trio, through
each stack: ollm's transport, httpx's own, and a transport handed in.
"""

from __future__ import annotations

import errno
import shutil
import ssl
from pathlib import Path

import httpx
import pytest
from raw_http import ok, raw_server, tls_server_context

import ollm
from ollm_http import MAX_REDIRECTS, ErrorContext, HTTPClient, HTTPConfig

pytestmark = pytest.mark.anyio

CONTEXT = ErrorContext(provider="The test server", code_name="test", url_setting="TEST_URL")
SECRETS = {
    "x-goog-api-key": "goog-secret",
    "api-key": "azure-secret",
    "X-Auth-Token": "token-secret",
    "X-Tenant": "tenant-secret",  # secret only because the config says so
}
PLAIN = {"User-Agent": "ollm-test", "X-Request-Id": "r-1"}


@pytest.fixture(params=["builtin", "httpx", "transport"])
def stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def client(url: str, stack: str, **settings: object) -> HTTPClient:
    transport = None
    if stack == "transport":  # a transport handed in keeps its own certificates
        cafile = settings.get("verify")
        verify = ssl.create_default_context(cafile=cafile) if isinstance(cafile, str) else True
        transport = httpx.AsyncHTTPTransport(verify=verify)
    return HTTPClient(
        HTTPConfig(url, context=CONTEXT, **settings),  # type: ignore[arg-type]
        stack="httpx" if stack == "httpx" else "builtin",
        transport=transport,
    )


def moved(status: int, location: str) -> bytes:
    return b"HTTP/1.1 %d Moved\r\nLocation: %s\r\nContent-Length: 7\r\n\r\nelsewhr" % (
        status,
        location.encode(),
    )


def head_of(request: bytes) -> bytes:
    return request.split(b"\r\n\r\n", 1)[0].lower()


@pytest.mark.parametrize("status", [302, 307])
async def test_a_redirect_to_another_server_drops_every_secret_header(
    stack: str, status: int
) -> None:
    async with raw_server([ok(b"arrived")]) as other:
        # A server may name credentials of its own in the address: they are not sent either.
        location = f"http://bob:pw@127.0.0.1:{other.port}/there"
        async with raw_server([moved(status, location)]) as first:
            http = client(
                f"http://alice:url-secret@127.0.0.1:{first.port}",
                stack,
                headers={**SECRETS, **PLAIN},
                secret_headers=["x-tenant"],
            )
            reply = await http.request("GET", "/here")
            assert (reply.status, reply.content) == (200, b"arrived")
            await http.aclose()
    sent = head_of(first.requests[0])
    assert all(value.encode() in sent for value in SECRETS.values())
    assert b"authorization: basic" in sent
    (followed,) = other.requests
    head = head_of(followed)
    assert head.startswith(b"get /there http/1.1")
    for name, value in SECRETS.items():
        assert name.lower().encode() not in head
        assert value.encode() not in head
    assert b"authorization" not in head
    assert b"user-agent: ollm-test" in head
    assert b"x-request-id: r-1" in head
    assert f"host: 127.0.0.1:{other.port}".encode() in head


# 303 (and 301, 302 for a POST) would turn it into a GET without its body: refused all
# the same, for its headers and because the server asked for something else.
@pytest.mark.parametrize("status", [303, 307, 308])
async def test_a_request_with_a_body_redirected_to_another_server_is_refused_in_words(
    stack: str, status: int
) -> None:
    async with raw_server([ok(b"stolen")]) as other:
        target = f"http://127.0.0.1:{other.port}/v1/chat"
        async with raw_server([moved(status, target)]) as first:
            http = client(f"http://alice:url-secret@127.0.0.1:{first.port}/v1", stack)
            with pytest.raises(ollm.BadResponseError) as caught:
                await http.request("POST", "/chat", json={"messages": ["the conversation"]})
            await http.aclose()
    assert str(caught.value) == (
        f"The test server at http://127.0.0.1:{first.port}/v1 redirected POST "
        f"http://127.0.0.1:{first.port}/v1/chat to {target}, another server. ollm does not "
        "send a request's body (a conversation) or its credentials on to another server. If "
        "the server has moved there, set TEST_URL to that address."
    )
    assert caught.value.code == "BAD_RESPONSE"
    assert other.requests == []


async def test_the_rules_hold_for_the_httpx_client_a_provider_uses_directly(stack: str) -> None:
    async with (
        raw_server([ok(b"stolen")]) as other,
        raw_server([moved(307, f"http://127.0.0.1:{other.port}/")]) as first,
    ):
        http = client(first.url, stack, headers=SECRETS)
        with pytest.raises(httpx.HTTPError) as caught:
            await http.client().post(http.url("/api/chat"), content=b"the conversation")
        assert http.error(caught.value).code == "BAD_RESPONSE"
        await http.aclose()
    assert other.requests == []


async def test_an_auth_given_to_the_httpx_client_is_not_sent_to_another_server(
    stack: str,
) -> None:
    async with (
        raw_server([ok(b"arrived")]) as other,
        raw_server([moved(302, f"http://127.0.0.1:{other.port}/")]) as first,
    ):
        http = client(first.url, stack)
        reply = await http.client().get(http.url("/"), auth=("alice", "auth-secret"))
        assert reply.content == b"arrived"
        await http.aclose()
    assert b"authorization: basic" in head_of(first.requests[0])
    assert b"authorization" not in head_of(other.requests[0])


async def test_a_redirect_on_the_same_server_keeps_its_body_and_its_headers(stack: str) -> None:
    answers = [moved(307, "/v2/chat"), moved(308, "/v3/chat"), ok(b"done")]
    async with raw_server(answers) as server:
        http = client(server.url, stack, headers=SECRETS)
        reply = await http.request("POST", "/v1/chat", json={"messages": ["hi"]})
        assert reply.content == b"done"
        await http.aclose()
    assert server.paths() == ["/v1/chat", "/v2/chat", "/v3/chat"]
    for request in server.requests:
        assert request.endswith(b'{"messages":["hi"]}')
        assert all(value.encode() in request for value in SECRETS.values())


async def test_redirects_stop_after_a_bounded_number_of_hops(stack: str) -> None:
    loop = [moved(302, f"/hop{n}") for n in range(MAX_REDIRECTS + 5)]
    async with raw_server(loop) as server:
        http = client(server.url, stack)
        with pytest.raises(ollm.BadResponseError, match="redirected too many times") as caught:
            await http.request("GET", "/")
        assert "TEST_URL" in str(caught.value)
        await http.aclose()
    assert len(server.requests) == MAX_REDIRECTS + 1


async def test_without_follow_redirects_the_redirect_itself_is_the_reply(stack: str) -> None:
    async with raw_server([moved(307, "http://127.0.0.1:1/")]) as server:
        http = client(server.url, stack, follow_redirects=False)
        reply = await http.request("POST", "/", json={})
        assert (reply.status, reply.headers["location"]) == (307, "http://127.0.0.1:1/")
        await http.aclose()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_an_upgrade_to_https_on_the_default_ports_is_the_same_server(
    stack: str, certificate: tuple[Path, Path]
) -> None:
    """http://host (port 80) to https://host (port 443): the request already went to that
    host in the clear, so the upgrade keeps its body and its key."""
    host = "127.0.0.2"  # in the certificate; ports 80 and 443 of 127.0.0.1 may be taken
    try:
        async with (
            raw_server(
                [ok(b"secure")], tls=tls_server_context(certificate), host=host, port=443
            ) as secure,
            raw_server([moved(308, f"https://{host}/api/chat")], host=host, port=80) as plain,
        ):
            http = client(f"http://{host}", stack, headers=SECRETS, verify=str(certificate[0]))
            reply = await http.request("POST", "/api/chat", json={"messages": ["hi"]})
            assert reply.content == b"secure"
            await http.aclose()
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EADDRINUSE, errno.EADDRNOTAVAIL):
            pytest.skip(f"ports 80 and 443 of {host} cannot be opened here ({exc})")
        raise
    assert plain.paths() == ["/api/chat"]
    (request,) = secure.requests
    assert request.endswith(b'{"messages":["hi"]}')
    assert all(value.encode() in request for value in SECRETS.values())


async def test_an_upgrade_to_https_on_another_port_is_another_server(stack: str) -> None:
    async with raw_server([moved(308, "https://127.0.0.1:1/api/chat")]) as plain:
        http = client(plain.url, stack, headers=SECRETS)
        with pytest.raises(ollm.BadResponseError, match="another server"):
            await http.request("POST", "/api/chat", json={})
        await http.aclose()
