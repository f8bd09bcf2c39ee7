"""https through ollm's transport: certificates, SSL_CERT_FILE, redirects from http, and
timeouts over TLS (a handshake that never ends, silence before the reply's head)."""

from __future__ import annotations

import shutil
from pathlib import Path

import certifi
import pytest
from raw_http import HANG, ok, raw_server, tls_server_context

import ollm
from ollm_http import ErrorContext, HTTPClient, HTTPConfig, Timeouts

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


@pytest.mark.parametrize("stack", ["builtin", "httpx"])
async def test_the_authorities_are_loaded_once_yet_a_changed_setting_or_bundle_is_seen(
    stack: str,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Clients share the SSL context of a setting (loading the authorities is the costly
    part of a client), but SSL_CERT_FILE set or unset, or a bundle rewritten in place,
    gives a new one: never the trust of the setting before."""
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    bundle = tmp_path / "bundle.pem"
    bundle.write_text("", encoding="utf-8")

    async def outcome(**settings: object) -> str:
        http = HTTPClient(HTTPConfig(server.url, **settings), stack=stack)  # type: ignore[arg-type]
        try:
            return (await http.request("GET", "/")).content.decode()
        except ollm.TLSError as refused:
            if "certificate could not be verified" not in refused.message:
                raise
            return "refused"
        finally:
            await http.aclose()

    async with raw_server([ok(b"trusted")] * 3, tls=tls_server_context(certificate)) as server:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        assert await outcome() == "refused"
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
        assert await outcome() == "trusted"
        monkeypatch.delenv("SSL_CERT_FILE")
        assert await outcome() == "refused"
        monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
        with pytest.raises(ollm.TLSError, match=f"read from {bundle} \\(SSL_CERT_FILE\\)"):
            await outcome()
        monkeypatch.delenv("SSL_CERT_FILE")
        # A private bundle: an empty one (named, with the next step), then the usual
        # authorities (not the server's), then the server's authority in the same file.
        with pytest.raises(ollm.TLSError, match=f"read from {bundle} \\(verify=\\).*Point"):
            await outcome(verify=str(bundle))
        bundle.write_bytes(Path(certifi.where()).read_bytes())
        assert await outcome(verify=str(bundle)) == "refused"
        bundle.write_bytes(certificate[0].read_bytes())
        assert await outcome(verify=str(bundle)) == "trusted"
        assert await outcome(verify=str(bundle)) == "trusted"


CONTEXT = ErrorContext(
    provider="Ollama",
    code_name="ollama",
    url_setting="OLLAMA_HOST",
    timeout_setting="OLLAMA_TIMEOUT",
    connect_timeout_setting="OLLAMA_CONNECT_TIMEOUT",
    read_timeout_hint="loading a large model can take minutes: raise OLLAMA_TIMEOUT",
)


async def timed_out(url: str, stack: str, **settings: object) -> str:
    """The message of the timeout a chat request to ``url`` ends with."""
    http = HTTPClient(
        HTTPConfig(url, context=CONTEXT, **settings),  # type: ignore[arg-type]
        stack=stack,  # type: ignore[arg-type]
    )
    with pytest.raises(ollm.RequestTimeoutError) as caught:
        await http.request("POST", "/api/chat", json={})
    await http.aclose()
    return caught.value.message


@pytest.mark.parametrize("stack", ["builtin", "httpx"])
async def test_a_handshake_that_never_ends_is_a_connect_timeout(stack: str) -> None:
    async with raw_server([HANG]) as silent:  # takes the connection, never answers TLS
        url = silent.url.replace("http://", "https://")
        assert await timed_out(url, stack, timeouts=Timeouts(connect=0.2)) == (
            f"Connecting to Ollama at {url} took longer than 0.2 s. Check that the server is "
            "up and reachable or raise OLLAMA_CONNECT_TIMEOUT."
        )


@pytest.mark.parametrize("stack", ["builtin", "httpx"])
async def test_silence_before_the_reply_over_tls_is_a_read_timeout(
    stack: str, certificate: tuple[Path, Path]
) -> None:
    """Ollama behind https while a big model loads: the head comes late, or never."""
    async with raw_server([HANG], tls=tls_server_context(certificate)) as loading:
        message = await timed_out(
            loading.url, stack, timeouts=Timeouts(read=0.2), verify=str(certificate[0])
        )
        assert message == (
            f"Ollama at {loading.url} sent nothing for 0.2 s. Loading a large model can take "
            "minutes: raise OLLAMA_TIMEOUT."
        )
