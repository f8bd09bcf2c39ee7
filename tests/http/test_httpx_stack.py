"""``HTTPClient(stack="httpx")``: httpx's own HTTP stack gets every setting of the config.

From the mutation run of ``ollm_http._client``: the settings that only this stack reads
(certificates as a file or a hashed directory, connection limits, keep-alive, the
environment) were never checked. Real servers on 127.0.0.1, plain and TLS.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import anyio.abc
import pytest
from raw_http import raw_server, tls_server_context

import ollm
from ollm_http import ErrorContext, HTTPClient, HTTPConfig, Limits

pytestmark = pytest.mark.anyio

CONTEXT = ErrorContext(provider="Test", code_name="test", url_setting="TEST_HOST")


def ok(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def httpx_client(url: str, **settings: object) -> HTTPClient:
    return HTTPClient(HTTPConfig(url, context=CONTEXT, **settings), stack="httpx")  # type: ignore[arg-type]


async def test_certificates_as_a_file_or_a_hashed_directory_are_trusted(
    certificate: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    cert = certificate[0]
    hashed = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", str(cert)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (tmp_path / f"{hashed}.0").write_bytes(cert.read_bytes())
    async with raw_server([ok(b"file"), ok(b"folder")], tls=tls_server_context(certificate)) as (
        server
    ):
        for verify, expected in ((str(cert), b"file"), (str(tmp_path), b"folder")):
            http = httpx_client(server.url, verify=verify)
            assert (await http.request("GET", "/")).content == expected
            await http.aclose()
    async with raw_server([ok(b"never")], tls=tls_server_context(certificate)) as server:
        http = httpx_client(server.url)  # the system's certificates do not know this one
        with pytest.raises(ollm.OllmError) as refused:
            await http.request("GET", "/")
        assert refused.value.code == "TLS_ERROR"
        await http.aclose()


async def test_max_connections_makes_requests_wait_their_turn() -> None:
    open_now = 0
    most = 0

    async def slow(request: bytes, stream: anyio.abc.ByteStream) -> None:
        nonlocal open_now, most
        open_now += 1
        most = max(most, open_now)
        await anyio.sleep(0.01)  # long enough for the others to ask, if they may
        open_now -= 1
        await stream.send(ok(b"ok"))

    async with raw_server([slow] * 3) as server:
        http = httpx_client(server.url, limits=Limits(max_connections=1))
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(http.request, "GET", "/")
        await http.aclose()
    assert (most, server.connections) == (1, 1)


@pytest.mark.parametrize(
    ("limits", "connections"),
    [(Limits(), 1), (Limits(max_idle=0), 2), (Limits(keepalive_expiry=0.0), 2)],
)
async def test_keep_alive_follows_max_idle_and_expiry(limits: Limits, connections: int) -> None:
    async with raw_server([ok(b"one"), ok(b"two")]) as server:
        http = httpx_client(server.url, limits=limits)
        assert (await http.request("GET", "/")).content == b"one"
        assert (await http.request("GET", "/")).content == b"two"
        await http.aclose()
    assert server.connections == connections


@pytest.mark.parametrize("trust_env", [True, False])
async def test_the_environment_is_read_only_when_trusted(
    monkeypatch: pytest.MonkeyPatch, trust_env: bool
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    async with (
        raw_server([ok(b"via proxy")]) as proxy,
        raw_server([ok(b"direct")], host="127.0.0.2") as server,
    ):
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        http = httpx_client(server.url, trust_env=trust_env)
        reply = await http.request("GET", "/")
        await http.aclose()
    assert reply.content == (b"via proxy" if trust_env else b"direct")
