"""Configuration: arguments, the environment, named profiles, and the `ollm` command line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helpers import OLLM, ollm_env

import ollm
from ollm_openai import OpenAIConfig, OpenAIProvider, load_profiles, profiles_path
from ollm_testutils import FakeOpenAIServer, OpenAIReply

PROFILES = """
[vllm]
base_url = "{url}"
model = "gpt-test"
api_key_env = "VLLM_KEY"
context_window = 8192
tools = true

[lmstudio]
base_url = "http://127.0.0.1:1234/v1"
"""


def test_defaults_and_the_environment() -> None:
    config = OpenAIConfig.resolve(environ={})
    assert config.base_url == "https://api.openai.com/v1"
    assert config.api_key is None
    assert config.official
    env = {
        "OPENAI_BASE_URL": "http://gpu:8000/v1/",
        "OPENAI_API_KEY": "sk-env",
        "OPENAI_ORG_ID": "org-1",
        "OPENAI_PROJECT_ID": "proj-1",
        "OLLM_OPENAI_MODEL": "qwen",
        "OLLM_OPENAI_TIMEOUT": "30",
    }
    config = OpenAIConfig.resolve(environ=env)
    assert (config.base_url, config.api_key, config.default_model) == (
        "http://gpu:8000/v1",
        "sk-env",
        "qwen",
    )
    assert (config.organization, config.project, config.timeout) == ("org-1", "proj-1", 30.0)
    assert not config.official
    # An argument wins over the environment.
    config = OpenAIConfig.resolve("http://other:1/v1", api_key="sk-arg", environ=env)
    assert (config.base_url, config.api_key) == ("http://other:1/v1", "sk-arg")


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"OPENAI_BASE_URL": "gpu:8000"}, "is not an http:// or https:// address"),
        ({"OPENAI_BASE_URL": "http://gpu:99999/v1"}, "port that is not between 1 and 65535"),
        (
            {"OPENAI_BASE_URL": "http://[::1:8000/v1"},
            "'http://[::1:8000/v1' (OPENAI_BASE_URL) is not a valid address (Invalid IPv6 URL)",
        ),
        ({"OLLM_OPENAI_TIMEOUT": "soon"}, "OLLM_OPENAI_TIMEOUT is 'soon'"),
        ({"OLLM_OPENAI_TIMEOUT": "-1"}, "must be a positive number"),
        ({"OLLM_OPENAI_HTTP": "curl"}, "OLLM_OPENAI_HTTP is 'curl'; use 'builtin'"),
    ],
)
def test_bad_settings_are_named(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ollm.OllmError) as caught:
        OpenAIConfig.resolve(environ=env)
    assert fragment in caught.value.message


def _profiles(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "openai.toml"
    path.write_text(text)
    return {"OLLM_OPENAI_PROFILES": str(path)}


def test_profiles_live_side_by_side(tmp_path: Path) -> None:
    env = _profiles(tmp_path, PROFILES.format(url="http://gpu:8000/v1"))
    env |= {"VLLM_KEY": "vk", "OPENAI_API_KEY": "sk-openai"}
    assert sorted(load_profiles(env)) == ["lmstudio", "vllm"]
    vllm = OpenAIConfig.resolve(profile="vllm", environ=env)
    assert (vllm.base_url, vllm.api_key, vllm.default_model) == (
        "http://gpu:8000/v1",
        "vk",
        "gpt-test",
    )
    assert (vllm.tools, vllm.context_window) == (True, 8192)
    lmstudio = OpenAIConfig.resolve(profile="lmstudio", environ=env)
    # The OpenAI key is never sent to another server by accident.
    assert lmstudio.api_key is None
    assert lmstudio.base_url == "http://127.0.0.1:1234/v1"


def test_a_profile_names_its_engine(tmp_path: Path) -> None:
    env = _profiles(tmp_path, "[box]\nbase_url = 'http://box:8080/v1'\nengine = 'llamacpp'\n")
    assert OpenAIConfig.resolve(profile="box", environ=env).known_engine == "llamacpp"
    official = OpenAIConfig.resolve("https://api.openai.com/v1", environ={})
    assert official.known_engine == "openai"
    assert OpenAIConfig.resolve("http://box:8000/v1", environ={}).known_engine is None


def test_the_default_profiles_file(tmp_path: Path) -> None:
    assert profiles_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "ollm" / "openai.toml"
    assert profiles_path({"HOME": str(tmp_path)}) == tmp_path / ".config" / "ollm" / "openai.toml"


@pytest.mark.parametrize(
    ("text", "profile", "fragment"),
    [
        ("", "vllm", "has none. Create it with a table [vllm]"),
        ("[other]\nbase_url = 'http://x:1/v1'\n", "vllm", "Known profiles: other"),
        ("[vllm]\nbase_ur = 'http://x:1/v1'\n", "vllm", "base_ur"),
        ("[vllm]\nmodel = 'm'\n", "vllm", "has no base_url"),
        ("[vllm\n", "vllm", "is not valid TOML"),
        ("vllm = 3\n", "vllm", "is not a table"),
        ("[vllm]\ntimeout = 'long'\n", "vllm", "timeout"),
        ("[vllm]\nbase_url = 'http://x:1/v1'\nengine = 'tgi'\n", "vllm", "engine"),
    ],
)
def test_a_bad_profile_is_named(tmp_path: Path, text: str, profile: str, fragment: str) -> None:
    env = _profiles(tmp_path, text)
    with pytest.raises(ollm.OllmError) as caught:
        OpenAIConfig.resolve(profile=profile, environ=env)
    assert fragment in caught.value.message
    assert str(tmp_path / "openai.toml") in caught.value.message


def test_profiles_through_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _profiles(tmp_path, PROFILES.format(url="http://gpu:8000/v1"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    registries = ollm.Registries()
    from ollm_openai.plugin import ollm_providers

    for spec in ollm_providers():
        registries.providers.register(spec)
    provider = registries.providers.get("openai:vllm")
    assert isinstance(provider, OpenAIProvider)
    assert provider.base_url == "http://gpu:8000/v1"
    assert provider.name == "openai:vllm"
    assert registries.providers.get("openai:vllm") is provider
    with pytest.raises(ollm.ProviderNotFoundError, match="Known profiles: lmstudio, vllm"):
        registries.providers.get("openai:nope")
    with pytest.raises(ollm.ProviderNotFoundError, match="names no profile"):
        registries.providers.get("openai:")
    registries.providers.set_default("openai:lmstudio")
    assert registries.providers.get_default().name == "openai:lmstudio"  # type: ignore[attr-defined]


def _ollm(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [OLLM, *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=ollm_env(**env),
    )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_ollm_chat_with_a_profile_and_a_tool(tmp_path: Path, backend: str) -> None:
    with FakeOpenAIServer(flavor="vllm") as server:
        server.script(
            OpenAIReply(tool_calls=[("calculate", {"expression": "17 * 23"})]),
            OpenAIReply(["17 times 23 is ", "391."]),
        )
        env = _profiles(tmp_path, PROFILES.format(url=server.base_url))
        result = _ollm(
            "--backend",
            backend,
            "chat",
            "-p",
            "openai:vllm",
            "-t",
            "calculate",
            "17*23?",
            VLLM_KEY="secret",
            **env,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout == "17 times 23 is 391.\n"
        assert 'calculate(expression="17 * 23")' in result.stderr
        first = server.chat_requests[0]
        assert first.headers["authorization"] == "Bearer secret"
        assert first.json["model"] == "gpt-test"
        assert first.json["tools"][0]["function"]["name"] == "calculate"


def test_ollm_chat_json_ends_with_error_and_finish_when_the_server_is_down() -> None:
    result = _ollm(
        "chat", "-p", "openai", "-m", "m", "--json", "hi", OPENAI_BASE_URL="http://127.0.0.1:9/v1"
    )
    assert result.returncode != 0
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["type"] for e in events][-2:] == ["error", "finish"]
    assert events[-2]["code"] == "CONNECTION_FAILED"
    assert "Traceback" not in result.stderr


def test_ollm_models_list_and_the_actions_a_server_cannot_do() -> None:
    with FakeOpenAIServer(flavor="vllm", models=["Qwen/Qwen3-8B", "BAAI/bge-m3"]) as server:
        listed = _ollm("models", "-p", "openai", "list", "--json", OPENAI_BASE_URL=server.base_url)
        assert listed.returncode == 0, listed.stderr
        models = json.loads(listed.stdout)
        names = [m["name"] for m in (models if isinstance(models, list) else models["models"])]
        assert names == ["BAAI/bge-m3", "Qwen/Qwen3-8B"]
        shown = _ollm(
            "models", "-p", "openai", "show", "Qwen/Qwen3-8B", OPENAI_BASE_URL=server.base_url
        )
        assert shown.returncode == 0, shown.stderr
        assert "context window  32,768 tokens" in shown.stdout
        pulled = _ollm("models", "-p", "openai", "pull", "x", OPENAI_BASE_URL=server.base_url)
        assert pulled.returncode != 0
        assert "cannot download models" in pulled.stderr
        assert "Traceback" not in pulled.stderr
