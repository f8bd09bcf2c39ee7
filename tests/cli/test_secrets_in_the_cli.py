"""What ``ollm`` prints and logs never holds a key or a URL's credentials.

A secret in ``OPENAI_BASE_URL``'s (``OLLAMA_HOST``'s, ``OLLM_GEMINI_BASE_URL``'s)
``user:secret@`` and in the API key; the server fails; neither stderr, nor ``--json``,
nor ``ollm models list``, nor the log database (``responses.error_message``) shows it.
An API key that cannot travel in a header (a curly quote pasted from a web page) is one
line naming the variable, never the key.
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import OLLM, ollm_env

from ollm_testutils import (
    AnthropicReply,
    FakeAnthropicServer,
    FakeGeminiServer,
    FakeOllamaServer,
    FakeOpenAIServer,
    GeminiReply,
    OpenAIReply,
)

SECRET = "sk-Sec7et0123456789abcdefXYZ"


def userinfo(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://alice:{SECRET}@{rest}"


@pytest.fixture(params=["ollama", "openai", "gemini", "anthropic"])
def failing(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, str]]]:
    """A provider's name and the environment that points it, with secrets, at a server
    that fails every chat with HTTP 500 (and every model list, for Ollama)."""
    name = str(request.param)
    if name == "ollama":
        with FakeOllamaServer() as ollama:
            ollama.fail(500, "boom")
            env = {"OLLAMA_HOST": userinfo(ollama.url), "OLLAMA_API_KEY": SECRET}
            yield name, {**env, "OLLM_MODEL": "llama3.2"}
    elif name == "openai":
        with FakeOpenAIServer() as openai:
            openai.script(*[OpenAIReply.failure(500, "boom")] * 6)
            env = {"OPENAI_BASE_URL": userinfo(openai.base_url), "OPENAI_API_KEY": SECRET}
            yield name, {**env, "OLLM_OPENAI_MODEL": "gpt-test"}
    elif name == "anthropic":
        with FakeAnthropicServer(api_key=SECRET) as anthropic:
            anthropic.script(*[AnthropicReply.failure(500, "api_error", "boom")] * 6)
            yield name, {"ANTHROPIC_BASE_URL": userinfo(anthropic.url), "ANTHROPIC_API_KEY": SECRET}
    else:
        with FakeGeminiServer(api_key=SECRET) as gemini:
            gemini.script(*[GeminiReply.failure(500, "boom", "INTERNAL")] * 6)
            yield name, {"OLLM_GEMINI_BASE_URL": userinfo(gemini.url), "GEMINI_API_KEY": SECRET}


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [OLLM, *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=ollm_env(OLLM_OPENAI_TIMEOUT="5", **env),
    )


def test_no_secret_on_the_screen_in_json_or_in_the_log(
    failing: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    name, env = failing
    env = {**env, "OLLM_LOGS_PATH": str(tmp_path / "logs.db")}
    text = run("chat", "-p", name, "hi", env=env)
    as_json = run("chat", "-p", name, "--json", "hi", env=env)
    models = run("models", "list", "-p", name, env=env)
    assert text.returncode == 1
    assert "error[PROVIDER_ERROR]" in text.stderr
    assert '"code":"PROVIDER_ERROR"' in as_json.stdout.replace(" ", "")
    logged = (tmp_path / "logs.db").read_bytes()
    with sqlite3.connect(tmp_path / "logs.db") as db:
        errors = [row[0] for row in db.execute("SELECT error_message FROM responses")]
    assert errors
    assert all(errors), errors
    for shown in (text.stderr, text.stdout, as_json.stdout, as_json.stderr, models.stderr):
        assert SECRET not in shown
    assert SECRET.encode() not in logged
    assert "alice" not in text.stderr  # the URL is shown without its userinfo


@pytest.mark.parametrize(
    ("name", "variable"),
    [
        ("openai", "OPENAI_API_KEY"),
        ("gemini", "GEMINI_API_KEY"),
        ("ollama", "OLLAMA_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
    ],
)
@pytest.mark.parametrize("command", [["models", "list"], ["chat", "hi"]])
def test_a_key_with_a_curly_quote_is_named_never_shown(
    name: str, variable: str, command: list[str]
) -> None:
    key = "sk-abc123\u201d"
    env = {variable: key, "OLLAMA_HOST": "127.0.0.1:1", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1"}
    result = run(command[0], "-p", name, *command[1:], env=env)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error[INVALID_REQUEST]:")
    assert variable in line
    assert "U+201D" in line
    assert "sk-abc123" not in line
    assert "Traceback" not in result.stderr
