"""``-p NAME``: names ignore case, and a provider of ollm's own that is missing names the
distribution to install."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest
from cli_helpers import OLLM, ollm_env

from ollm_testutils import FakeOllamaServer, OllamaReply

PARROT = """
import ollm


class Parrot:
    name = "Parrot"
    default_model = "polly"

    async def chat_stream(self, request):
        yield ollm.TextEvent("Polly wants a cracker")
        yield ollm.FinishEvent("stop")


@ollm.hookimpl
def ollm_providers():
    return [ollm.ProviderSpec("Parrot", Parrot, "A provider named in capitals")]
"""


def _chat(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [OLLM, "chat", "--no-log", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=ollm_env(**env),
    )


@pytest.mark.parametrize("name", ["parrot", "PARROT", "Parrot"])
def test_a_provider_registered_in_capitals_answers_in_any_case(
    plugin_path: Callable[[str, str], str], name: str
) -> None:
    done = _chat("-p", name, "hi", PYTHONPATH=plugin_path("parrot", PARROT))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Polly wants a cracker\n"
    assert done.stderr == ""


def test_ollama_in_capitals_is_ollama(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.script(OllamaReply("Hi."))
    done = run_ollm("chat", "--no-log", "-p", "OLLAMA", "-m", "llama3.2", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hi.\n"


@pytest.mark.parametrize(
    ("plugin", "provider", "distribution"),
    [
        ("testutils", "echo", "ollm-testutils"),
        ("openai", "openai", "ollm-openai"),
        ("openai", "openai:vllm", "ollm-openai"),
        ("gemini", "gemini", "ollm-gemini"),
        ("anthropic", "anthropic", "ollm-anthropic"),
        ("anthropic", "anthropic:local", "ollm-anthropic"),
        ("ollama", "ollama", "ollm-ollama"),
    ],
)
def test_a_missing_provider_of_ollm_names_what_to_install(
    plugin: str, provider: str, distribution: str
) -> None:
    """As after `pip install ollm-core ollm-ollama`, played by blocking the plugin."""
    done = _chat("-p", provider, "-m", "m", "hi", OLLM_BLOCK_PLUGINS=plugin)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(
        f"error[PROVIDER_NOT_FOUND]: Provider {provider!r} is not installed: it comes with "
        f"{distribution}. Install it with: pip install {distribution}."
    )
    as_json = _chat("-p", provider, "-m", "m", "--json", "hi", OLLM_BLOCK_PLUGINS=plugin)
    error = json.loads(as_json.stdout.splitlines()[0])
    assert error["code"] == "PROVIDER_NOT_FOUND"
    assert f"pip install {distribution}" in error["message"]


def test_no_default_provider_is_said_with_flags_not_python() -> None:
    for extra in ([], ["--json"]):
        done = _chat(*extra, "hi", OLLM_BLOCK_PLUGINS="ollama")
        assert done.returncode == 1
        said = done.stderr + done.stdout
        assert "No default provider" in said
        assert "(-p NAME, or OLLM_PROVIDER=NAME)" in said
        assert "provider=NAME" not in said.replace("OLLM_PROVIDER=NAME", "")
        assert "set_default" not in said
