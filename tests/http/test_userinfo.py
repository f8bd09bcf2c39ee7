"""A URL's userinfo with an unescaped ``@`` (people paste passwords as they are), and the
credentials a URL gives next to the ones a header gives: bugs planted by hand that the
first tests let through (tests/plants.toml, module ``http``). Real sockets on 127.0.0.1."""

from __future__ import annotations

import base64

import pytest
from raw_http import ok, raw_server

from ollm_http import ErrorContext, HTTPClient, HTTPConfig, without_userinfo
from ollm_http._config import split_credentials

CONTEXT = ErrorContext(provider="The test server", code_name="test", url_setting="TEST_URL")


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # urllib splits the userinfo at the last "@", as browsers and curl do.
        (
            "http://alice:p@ss@127.0.0.1:8080/v1",
            ("http://127.0.0.1:8080/v1", basic("alice", "p@ss")),
        ),
        ("http://a@b:c@d@host/x", ("http://host/x", basic("a@b", "c@d"))),
        ("http://tok@en@host", ("http://host", basic("tok@en", ""))),
    ],
)
def test_the_userinfo_ends_at_the_last_at_sign(url: str, expected: tuple[str, str]) -> None:
    assert split_credentials(url) == expected
    assert without_userinfo(url) == expected[0]


@pytest.mark.parametrize(
    "url",
    [
        "http://alice:p@ss@[::1",  # the parser refuses it: the credentials go all the same
        "http://alice:p@ss@127.0.0.1:x/v1",
    ],
)
def test_an_address_that_cannot_be_parsed_keeps_no_part_of_the_password(url: str) -> None:
    shown = without_userinfo(url)
    assert "alice" not in shown
    assert "p@" not in shown
    assert "ss@" not in shown


def _authorization(request: bytes) -> str | None:
    for line in request.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"authorization":
            return value.strip().decode()
    return None


@pytest.mark.anyio
async def test_a_password_with_an_at_sign_reaches_the_server_whole(anyio_backend: str) -> None:
    async with raw_server([ok()]) as server:
        url = server.url.replace("://", "://alice:p@ss@")
        http = HTTPClient(HTTPConfig(url, context=CONTEXT))
        try:
            reply = await http.request("GET", "/models")
            assert reply.status == 200
            assert repr(reply) == f"<Reply 200 to GET {server.url}/models>"
        finally:
            await http.aclose()
    (request,) = server.requests
    assert request.startswith(b"GET /models ")
    assert _authorization(request) == basic("alice", "p@ss")
    host = [line for line in request.split(b"\r\n") if line.lower().startswith(b"host:")]
    assert host == [f"Host: 127.0.0.1:{server.port}".encode()]


@pytest.mark.anyio
async def test_an_authorization_header_given_wins_over_the_urls(anyio_backend: str) -> None:
    async with raw_server([ok()]) as server:
        url = server.url.replace("://", "://alice:pw@")
        config = HTTPConfig(url, headers={"Authorization": "Bearer mine"}, context=CONTEXT)
        http = HTTPClient(config)
        try:
            await http.request("GET", "/models")
        finally:
            await http.aclose()
    (request,) = server.requests
    assert _authorization(request) == "Bearer mine"
