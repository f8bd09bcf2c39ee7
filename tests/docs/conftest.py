"""Fixtures of the documentation's tests: the fake servers, and a folder per document
(see docs_world, in tests/support)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from docs_world import ROOT, Sandbox, Servers, environment, prepare

from ollm_testutils import (
    FakeAnthropicServer,
    FakeGeminiServer,
    FakeOllamaServer,
    FakeOpenAIServer,
)


@pytest.fixture(scope="session")
def docs_servers() -> Iterator[Servers]:
    """The fake servers, with the models the documents name."""
    models = ["Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "llama3.2", "gpt-4.1-mini", "text-embedding-3"]
    with (
        FakeOllamaServer() as ollama,
        FakeOpenAIServer(models=models) as openai,
        FakeGeminiServer() as gemini,
        FakeAnthropicServer() as anthropic,
    ):
        ollama.add_model("qwen3", ["completion", "tools", "thinking"])
        ollama.add_model("qwen3:8b", ["completion", "tools", "thinking"], local=False)
        ollama.add_model("gemma2:2b", ["completion"])
        ollama.add_model("all-minilm", ["embedding"], family="bert")
        yield Servers(ollama, openai, gemini, anthropic)


@pytest.fixture(scope="session")
def sandbox_for(
    docs_servers: Servers, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[Path], Sandbox]:
    """The folder of a document, made on first use."""
    made: dict[Path, Sandbox] = {}
    lock = threading.Lock()

    def sandbox(document: Path) -> Sandbox:
        with lock:
            if document in made:
                return made[document]
            name = document.relative_to(ROOT).as_posix().replace("/", "-")
            root = tmp_path_factory.mktemp(name)
            prepare(root, document, docs_servers)
            made[document] = Sandbox(root, environment(root, docs_servers), docs_servers)
            return made[document]

    return sandbox
