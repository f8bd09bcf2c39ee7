"""https through ollm's transport: certificates, SSL_CERT_FILE, redirects from http."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from raw_http import ok, raw_server, tls_server_context

import ollm
from ollm_http import HTTPClient, HTTPConfig

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command"),
]


async def test_an_unknown_authority_is_a_tls_error_with_the_next_step(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    async with raw_server([ok()], tls=tls_server_context(certificate)) as server:
        http = HTTPClient(HTTPConfig(server.url))
        with pytest.raises(ollm.TLSError, match="SSL_CERT_FILE") as caught:
            await http.request("GET", "/")
        assert caught.value.code == "TLS_ERROR"
        await http.aclose()


async def test_a_private_authority_is_trusted_through_verify_or_ssl_cert_file(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with raw_server([ok(b"one"), ok(b"two")], tls=tls_server_context(certificate)) as server:
        http = HTTPClient(HTTPConfig(server.url, verify=str(certificate[0])))
        assert (await http.request("GET", "/")).content == b"one"
        await http.aclose()
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
        http = HTTPClient(HTTPConfig(server.url))
        assert (await http.request("GET", "/")).content == b"two"
        await http.aclose()


async def test_a_redirect_from_http_to_https_is_followed(certificate: tuple[Path, Path]) -> None:
    async with raw_server([ok(b"secure")], tls=tls_server_context(certificate)) as secure:
        moved = b"HTTP/1.1 301 Moved\r\nLocation: %s/api\r\nContent-Length: 0\r\n\r\n" % (
            secure.url.encode()
        )
        async with raw_server([moved]) as plain:
            http = HTTPClient(HTTPConfig(plain.url, verify=str(certificate[0])))
            assert (await http.request("GET", "/api")).content == b"secure"
            await http.aclose()
        assert secure.paths() == ["/api"]
