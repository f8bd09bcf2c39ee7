"""Fixtures of the real-server tests: llama-cpp-python's own OpenAI-compatible server
(``python -m llama_cpp.server``) on the test model, started once per session.

Every test here is marked ``realserver``: ``-m "not realserver"`` leaves them out on a
developer's machine. In CI (``CI`` set) they never skip: a server that cannot start fails
them; elsewhere it skips them, saying why.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from lanes import one_backend_with_the_model
from llama_server import MODEL, LlamaServer
from llamacpp_helpers import assemble_model

import ollm
from ollm_openai import OpenAIProvider

# Small windows and replies keep the tests quick on two shared cores.
N_CTX = 1024
MAX_TOKENS = 24


def started(server: LlamaServer) -> LlamaServer:
    """``server`` started; a failure fails the test in CI, skips it elsewhere."""
    try:
        return server.start()
    except Exception as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the real llama.cpp server did not start: {exc}")
        pytest.skip(f"the real llama.cpp server did not start: {exc}")


@pytest.fixture(scope="session")
def model_file() -> Path:
    return assemble_model() / f"{MODEL}.gguf"


@pytest.fixture(scope="session")
def llama_server(
    model_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """One chat server for the session (the tests never stop or break it)."""
    server = started(LlamaServer(model_file, n_ctx=N_CTX, log_dir=tmp_path_factory.mktemp("ls")))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def embedding_server(
    model_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    """A second instance with embeddings on (llama.cpp embeds in a context made for it)."""
    server = LlamaServer(
        model_file, n_ctx=512, embedding=True, log_dir=tmp_path_factory.mktemp("le")
    )
    started(server)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_server(model_file: Path, tmp_path: Path) -> Iterator[LlamaServer]:
    """A server of the test's own, which it may kill."""
    server = started(LlamaServer(model_file, n_ctx=N_CTX, log_dir=tmp_path))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def provider(llama_server: LlamaServer) -> AsyncIterator[OpenAIProvider]:
    async with OpenAIProvider(llama_server.base_url, model=MODEL, environ={}) as made:
        yield made


def settings(**more: Any) -> dict[str, Any]:
    """A chat's settings: greedy, a short reply."""
    options = ollm.GenerationOptions(temperature=0.0, max_tokens=MAX_TOKENS, seed=1)
    return {"options": options, **more}


def client_for(provider: ollm.ProviderAdapter, **more: Any) -> ollm.ChatClient:
    """A client on ``provider`` with every installed plugin (ReAct, the tools)."""
    registries = ollm.discover()
    return ollm.ChatClient(registries, provider=provider, model=MODEL, **settings(**more))


async def events_of(client: ollm.ChatClient, prompt: str, **kwargs: Any) -> list[ollm.ChatEvent]:
    async with client.chat(prompt, **kwargs) as events:
        return [event async for event in events]


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, ollm.TextEvent))


def errors_of(events: list[Any]) -> list[ollm.ErrorEvent]:
    return [e for e in events if isinstance(e, ollm.ErrorEvent)]


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    one_backend_with_the_model(metafunc)
