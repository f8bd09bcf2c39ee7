"""Internal: the SSL context of a ``verify`` setting, made once per process.

Loading the certificate authorities is the costly part of an HTTP client (about 50 ms
for certifi's bundle, more than the rest of a provider's set-up together), and it is
the same for every client with the same setting: so a context is made on first use and
shared. The key holds what the context was made from: ``SSL_CERT_FILE`` and
``SSL_CERT_DIR`` (when the environment is trusted) and a bundle's size and time of
change, so a changed setting or file gets a new context, never a stale one.
"""

from __future__ import annotations

import os
import ssl
from functools import lru_cache

import httpx

from ollm.errors import TLSError

__all__ = ["ssl_context"]


def ssl_context(verify: bool | str | ssl.SSLContext, *, trust_env: bool = True) -> ssl.SSLContext:
    """The context for ``verify``: ``True`` (the system's authorities through certifi,
    or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when ``trust_env``), ``False`` (no
    verification), a CA bundle's path (a file or a folder), or a context of the
    caller's own (returned as it is)."""
    if isinstance(verify, ssl.SSLContext):
        return verify
    if isinstance(verify, str):
        try:
            stat = os.stat(verify)
            version: tuple[int, int] = (stat.st_mtime_ns, stat.st_size)
            return _bundle(verify, version)
        except (OSError, ssl.SSLError) as exc:
            raise _unusable(verify, "verify=", exc) from None
    if verify and trust_env:
        cert_file, cert_dir = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
        try:
            return _default(True, cert_file, cert_dir)
        except (OSError, ssl.SSLError) as exc:
            setting = "SSL_CERT_FILE" if cert_file else "SSL_CERT_DIR"
            raise _unusable(str(cert_file or cert_dir), setting, exc) from None
    return _default(bool(verify), None, None)


def _unusable(path: str, setting: str, exc: BaseException) -> TLSError:
    reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
    return TLSError(
        f"No certificate authority could be read from {path} ({setting}): {reason}. Point "
        f"{setting} at a PEM file of the server's certificate authority (or a folder of "
        "them), or leave it unset to trust the usual authorities."
    )


@lru_cache(maxsize=8)
def _default(verify: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    # httpx reads SSL_CERT_FILE and SSL_CERT_DIR itself; the key above holds their values.
    return httpx.create_ssl_context(verify=verify, trust_env=bool(cert_file or cert_dir))


@lru_cache(maxsize=8)
def _bundle(path: str, version: tuple[int, int]) -> ssl.SSLContext:
    if os.path.isdir(path):
        return ssl.create_default_context(capath=path)
    return ssl.create_default_context(cafile=path)
