"""https through ollm's transport: certificates, SSL_CERT_FILE, redirects from http."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
from raw_http import ok, raw_server

import ollm
from ollm_http import HTTPClient, HTTPConfig

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command"),
]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, and its key."""
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def server_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


async def test_an_unknown_authority_is_a_tls_error_with_the_next_step(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    async with raw_server([ok()], tls=server_context(certificate)) as server:
        http = HTTPClient(HTTPConfig(server.url))
        with pytest.raises(ollm.TLSError, match="SSL_CERT_FILE") as caught:
            await http.request("GET", "/")
        assert caught.value.code == "TLS_ERROR"
        await http.aclose()


async def test_a_private_authority_is_trusted_through_verify_or_ssl_cert_file(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with raw_server([ok(b"one"), ok(b"two")], tls=server_context(certificate)) as server:
        http = HTTPClient(HTTPConfig(server.url, verify=str(certificate[0])))
        assert (await http.request("GET", "/")).content == b"one"
        await http.aclose()
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
        http = HTTPClient(HTTPConfig(server.url))
        assert (await http.request("GET", "/")).content == b"two"
        await http.aclose()


async def test_a_redirect_from_http_to_https_is_followed(certificate: tuple[Path, Path]) -> None:
    async with raw_server([ok(b"secure")], tls=server_context(certificate)) as secure:
        moved = b"HTTP/1.1 301 Moved\r\nLocation: %s/api\r\nContent-Length: 0\r\n\r\n" % (
            secure.url.encode()
        )
        async with raw_server([moved]) as plain:
            http = HTTPClient(HTTPConfig(plain.url, verify=str(certificate[0])))
            assert (await http.request("GET", "/api")).content == b"secure"
            await http.aclose()
        assert secure.paths() == ["/api"]
