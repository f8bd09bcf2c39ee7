"""Fixtures of the llamacpp tests: the real model's folder, a provider on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from lanes import one_backend_with_the_model
from llamacpp_helpers import MODEL, assemble_model

from ollm_llamacpp import LlamaCppProvider


@pytest.fixture(scope="session")
def models_dir() -> Path:
    """A models folder that holds ``gemma-3-270m.gguf``."""
    return assemble_model()


@pytest.fixture(scope="session")
def model_file(models_dir: Path) -> Path:
    return models_dir / f"{MODEL}.gguf"


@pytest.fixture
async def provider(models_dir: Path) -> AsyncIterator[LlamaCppProvider]:
    """A provider on the models folder (two threads: the machine's cores are shared)."""
    async with LlamaCppProvider(models_dir=models_dir, threads=2, max_context=2048) as made:
        yield made


@pytest.fixture
def closed_port() -> int:
    """A loopback port nobody listens on (connections are refused): no Ollama there."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    one_backend_with_the_model(metafunc)
