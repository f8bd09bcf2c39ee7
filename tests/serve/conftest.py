"""Fixtures of ollm serve's tests: the app in-process (httpx's ASGITransport) or on a
real uvicorn at 127.0.0.1 (``ollm_serve.running``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

import ollm
from ollm_serve import ServeApp, ServeSettings, create_app, running
from ollm_testutils import ScriptedProvider

KEY = "test-key-of-twenty-chars"


@pytest.fixture
def scripted() -> ScriptedProvider:
    return ScriptedProvider(name="scripted", embedding_dimensions=3, models=["mock-model"])


@pytest.fixture
def registries(scripted: ScriptedProvider) -> ollm.Registries:
    # The installed plugins (ReAct's strategies among them), and the scripted provider.
    registries = ollm.discover()
    registries.providers.register(scripted)
    return registries


def make_app(
    registries: ollm.Registries, providers: tuple[str, ...] = ("scripted",), **settings: object
) -> ServeApp:
    return create_app(providers, registries=registries, settings=ServeSettings(**settings))  # type: ignore[arg-type]


@pytest.fixture
def app(registries: ollm.Registries) -> ServeApp:
    return make_app(registries)


def asgi_client(app: ServeApp, **kwargs: object) -> httpx.AsyncClient:
    """An httpx client that calls ``app`` in-process."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://serve", **kwargs
    )  # type: ignore[arg-type]


@pytest.fixture
async def http(app: ServeApp) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as client:
        yield client


@pytest.fixture
def served(app: ServeApp) -> Iterator[str]:
    """The URL of ``app`` on a real uvicorn at 127.0.0.1."""
    with running(app) as url:
        yield url
