"""Fixtures for the tests of ollm-testutils: pytester, and plain HTTP clients."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from ollm_testutils.fake_ollama import FakeOllamaServer

pytest_plugins = ["pytester"]


@pytest.fixture
def server() -> Iterator[FakeOllamaServer]:
    """A running fake server (the plugin's fixture is tested on its own)."""
    with FakeOllamaServer() as running:
        yield running


@pytest.fixture
def client(server: FakeOllamaServer) -> Iterator[httpx.Client]:
    """A plain synchronous httpx client on the fake server."""
    with httpx.Client(base_url=server.url, timeout=10.0) as http:
        yield http


@pytest.fixture
async def aclient(server: FakeOllamaServer) -> AsyncIterator[httpx.AsyncClient]:
    """A plain async httpx client on the fake server (asyncio and trio)."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10.0) as http:
        yield http
