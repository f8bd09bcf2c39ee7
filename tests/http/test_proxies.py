"""Proxies from the environment, from the mutation run of ``ollm_http._client``.

A server behind ``HTTP_PROXY`` (or ``ALL_PROXY``) is reached through the proxy; loopback
servers and those named in ``NO_PROXY`` are reached directly. The proxy here is a raw
server on 127.0.0.1 that answers as a forward proxy does (it sees the absolute URL), and
127.0.0.2 stands for a server elsewhere: it is loopback to the kernel, not to a name list.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import anyio
import anyio.abc
import pytest
from raw_http import Handler, RawServer, raw_server, tls_server_context

from ollm_http import ErrorContext, HTTPClient, HTTPConfig
from ollm_testutils import FakeOllamaServer

pytestmark = pytest.mark.anyio

CONTEXT = ErrorContext(provider="Test", code_name="test", url_setting="TEST_HOST")
PROXY_VARIABLES = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"]


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def ok(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


async def fetch(url: str) -> bytes:
    http = HTTPClient(HTTPConfig(url, context=CONTEXT))
    try:
        return (await http.request("POST", "/api/x", json={})).content
    finally:
        await http.aclose()


def request_lines(server: RawServer) -> list[bytes]:
    return [request.split(b"\r\n", 1)[0] for request in server.requests]


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
async def test_a_server_elsewhere_is_reached_through_the_proxy(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    async with raw_server([ok(b"via proxy")]) as proxy:
        monkeypatch.setenv(variable, proxy.url)
        # Nothing listens on 127.0.0.2:9: only the proxy can answer.
        assert await fetch("http://127.0.0.2:9") == b"via proxy"
        assert request_lines(proxy) == [b"POST http://127.0.0.2:9/api/x HTTP/1.1"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
async def test_a_loopback_server_is_reached_directly_whatever_the_proxy(
    monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    async with (
        raw_server([ok(b"via proxy")]) as proxy,
        raw_server([ok(b"direct")], host="::1" if host == "::1" else "127.0.0.1") as server,
    ):
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        url = server.url.replace("127.0.0.1", host)
        assert await fetch(url) == b"direct"
        assert proxy.requests == []


async def test_a_server_named_in_no_proxy_is_reached_directly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with (
        raw_server([ok(b"via proxy")]) as proxy,
        raw_server([ok(b"direct")], host="127.0.0.2") as server,
    ):
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.2")
        assert await fetch(server.url) == b"direct"
        assert proxy.requests == []


async def test_without_trust_env_the_proxy_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    async with (
        raw_server([ok(b"via proxy")]) as proxy,
        raw_server([ok(b"direct")], host="127.0.0.2") as server,
    ):
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        http = HTTPClient(HTTPConfig(server.url, context=CONTEXT, trust_env=False))
        assert (await http.request("POST", "/api/x", json={})).content == b"direct"
        await http.aclose()
        assert proxy.requests == []


def test_one_client_serves_one_event_loop_after_another() -> None:
    """Each event loop gets its own pool: a kept-alive connection never crosses loops."""
    with FakeOllamaServer() as server:
        http = HTTPClient(HTTPConfig(server.url, context=CONTEXT))
        versions: list[str] = []

        async def ask() -> None:
            for _ in range(2):  # the second request rides the kept-alive connection
                reply = await http.request("POST", "/api/show", json={"model": "llama3.2"})
                versions.append(reply.json()["details"]["family"])

        for backend in ("asyncio", "trio", "asyncio"):
            anyio.run(ask, backend=backend)
        assert versions == ["llama"] * 6


def tunnel() -> Handler:
    """A forward proxy's answer to CONNECT: a byte pipe to the target."""

    async def answer(connect: bytes, stream: anyio.abc.ByteStream) -> None:
        target = connect.split(b" ", 2)[1].decode()
        host, port = target.rsplit(":", 1)
        await stream.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
        async with await anyio.connect_tcp(host, int(port)) as remote:

            async def copy(source: anyio.abc.ByteStream, sink: anyio.abc.ByteStream) -> None:
                with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                    async for data in source:
                        await sink.send(data)
                with contextlib.suppress(anyio.BrokenResourceError, OSError):
                    await sink.send_eof()

            async with anyio.create_task_group() as group:
                group.start_soon(copy, stream, remote)
                group.start_soon(copy, remote, stream)

    return answer


async def test_https_through_the_proxy_checks_the_server_with_the_configured_certificates(
    monkeypatch: pytest.MonkeyPatch, certificate: tuple[Path, Path]
) -> None:
    """Through a CONNECT tunnel, the server's certificate is checked against ``verify``."""
    tls = tls_server_context(certificate)
    async with (
        raw_server([tunnel()]) as proxy,
        raw_server([ok(b"secret")], tls=tls, host="127.0.0.2") as server,
    ):
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        http = HTTPClient(HTTPConfig(server.url, context=CONTEXT, verify=str(certificate[0])))
        assert (await http.request("POST", "/api/x", json={})).content == b"secret"
        await http.aclose()
        assert request_lines(proxy) == [f"CONNECT 127.0.0.2:{server.port} HTTP/1.1".encode()]
