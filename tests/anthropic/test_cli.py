"""``ollm chat -p anthropic`` and ``ollm models -p anthropic`` against the fake Messages API,
through the installed console script."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helpers import OLLM, ollm_env

from ollm_testutils import AnthropicReply, AnthropicThinking, FakeAnthropicServer

from .conftest import KEY, MODEL


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
def test_ollm_chat_with_calculate_completes_a_round_trip(backend: str) -> None:
    with FakeAnthropicServer(api_key=KEY) as server:
        server.script(
            AnthropicReply(
                thinking=[AnthropicThinking("Multiply.", signature="sig-cli")],
                tool_uses=[("calculate", {"expression": "17 * 23"})],
            ),
            AnthropicReply(["17 times 23 is ", "391."]),
        )
        result = _ollm(
            "--backend",
            backend,
            "chat",
            "-p",
            "anthropic",
            "-m",
            MODEL,
            "--think",
            "low",
            "-t",
            "calculate",
            "17*23?",
            ANTHROPIC_API_KEY=KEY,
            ANTHROPIC_BASE_URL=server.url,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.endswith("17 times 23 is 391.\n")
        assert 'calculate(expression="17 * 23")' in result.stderr
        first, second = (r.json for r in server.message_requests)
        assert first["tools"][0]["name"] == "calculate"
        assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assistant, answer = second["messages"][1:]
        assert assistant["content"][0] == {
            "type": "thinking",
            "thinking": "Multiply.",
            "signature": "sig-cli",
        }
        assert answer["content"][0]["content"] == "391"


def test_ollm_models_list_shows_the_apis_models() -> None:
    with FakeAnthropicServer(api_key=KEY) as server:
        listed = _ollm(
            "models",
            "-p",
            "anthropic",
            "list",
            "--json",
            ANTHROPIC_API_KEY=KEY,
            ANTHROPIC_BASE_URL=server.url,
        )
    assert listed.returncode == 0, listed.stderr
    models = json.loads(listed.stdout)
    names = [m["name"] for m in (models if isinstance(models, list) else models["models"])]
    assert names == sorted(server.models)


def test_ollm_chat_json_with_a_wrong_key_ends_with_error_and_finish() -> None:
    with FakeAnthropicServer(api_key=KEY) as server:
        result = _ollm(
            "chat",
            "-p",
            "anthropic",
            "--json",
            "hi",
            ANTHROPIC_API_KEY="wrong",
            ANTHROPIC_BASE_URL=server.url,
        )
    assert result.returncode != 0
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["type"] for e in events][-2:] == ["error", "finish"]
    assert events[-2]["code"] == "AUTH_FAILED"
    assert "ANTHROPIC_API_KEY" in events[-2]["message"]
    assert "Traceback" not in result.stderr


def test_ollm_chat_reaches_a_compatible_server_through_a_profile(tmp_path: Path) -> None:
    with FakeAnthropicServer(api_key="local-secret") as server:
        server.script(AnthropicReply(["Hi from ", "local."]))
        profiles = tmp_path / "anthropic.toml"
        profiles.write_text(
            f'[local]\nbase_url = "{server.url}"\nmodel = "{MODEL}"\napi_key_env = "LOCAL_KEY"\n'
        )
        result = _ollm(
            "chat",
            "-p",
            "anthropic:local",
            "hi",
            OLLM_ANTHROPIC_PROFILES=str(profiles),
            LOCAL_KEY="local-secret",
            ANTHROPIC_API_KEY="not-for-this-server",
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout == "Hi from local.\n"
        assert server.message_requests[0].headers["x-api-key"] == "local-secret"
