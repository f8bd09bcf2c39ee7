"""Fixtures shared by the HTTP layer's tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from raw_http import self_signed_certificate


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, and its key (skips without openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    return self_signed_certificate(tmp_path_factory.mktemp("tls"))
