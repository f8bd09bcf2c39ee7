"""The `ollama` entry point: registered as the default provider, without importing httpx."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import ollm
import ollm_ollama
from ollm.plugins import PluginSettings
from ollm_ollama import OllamaProvider

# The testutils guard keeps provider plugins out of discovery in tests; these check it.
pytestmark = pytest.mark.ollm_real_providers


def test_discovery_registers_ollama_as_the_default_provider() -> None:
    registries = ollm.discover(settings=PluginSettings(allow=frozenset({"ollama"})))
    record = next(r for r in registries.plugins if r.name == "ollama")
    assert record.status == "loaded", record
    assert record.distribution == "ollm-ollama"
    assert record.hooks == ("ollm_providers",)
    assert registries.providers.default_name == "ollama"
    spec = registries.providers.spec("ollama")
    assert spec.default
    assert spec.description == "Ollama on this machine or OLLAMA_HOST"
    provider = registries.providers.get()
    assert isinstance(provider, OllamaProvider)


def test_the_factory_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "0.0.0.0:11435")
    registries = ollm.discover(settings=PluginSettings(allow=frozenset({"ollama"})))
    provider = registries.providers.get("ollama")
    assert isinstance(provider, OllamaProvider)
    assert provider.host == "http://127.0.0.1:11435"


def test_discovery_does_not_import_httpx() -> None:
    code = textwrap.dedent(
        """
        import sys
        import ollm
        registries = ollm.discover()
        assert "ollama" in registries.providers, registries.plugins
        assert "httpx" not in sys.modules, "discovery imported httpx"
        import ollm_ollama.plugin, ollm_ollama
        assert "httpx" not in sys.modules, "the plugin module imported httpx"
        registries.providers.get("ollama")
        assert "httpx" in sys.modules
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


def test_the_package_exports_lazily() -> None:
    assert ollm_ollama.OllamaProvider is OllamaProvider
    assert ollm_ollama.parse_host("") == "http://127.0.0.1:11434"
    assert "OllamaProvider" in dir(ollm_ollama)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ollm_ollama.nope  # noqa: B018


def test_the_provider_offers_every_capability_the_runtime_detects() -> None:
    provider = OllamaProvider(environ={})
    for protocol in (
        ollm.ProviderAdapter,
        ollm.TokenCounting,
        ollm.ModelInspection,
        ollm.ModelManagement,
        ollm.RunningModels,
        ollm.Embeddings,
        ollm.HealthChecking,
        ollm.Closeable,
    ):
        assert isinstance(provider, protocol), protocol
    assert provider.name == "ollama"
    assert provider.handles_abort is True
    assert repr(provider) == "OllamaProvider(url='http://127.0.0.1:11434')"
