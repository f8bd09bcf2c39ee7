"""Fixtures of ollm serve's tests: the app in-process (httpx's ASGITransport) or on a
real uvicorn at 127.0.0.1 (a port the test binds first, so no waiting for it)."""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import uvicorn

import ollm
from ollm_serve import ServeApp, ServeSettings, create_app
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


class RunningServer:
    """``app`` on uvicorn in a thread, at ``url``."""

    def __init__(self, app: ServeApp) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        # A request still running at the end (a test that failed) is cut after the grace.
        config = uvicorn.Config(
            app,
            http="httptools",
            lifespan="off",
            log_level="warning",
            timeout_graceful_shutdown=5,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]})

    def __enter__(self) -> RunningServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join()
        self.sock.close()


@pytest.fixture
def served(app: ServeApp) -> Iterator[RunningServer]:
    with RunningServer(app) as server:
        yield server
