"""The cassette's pytest plugin: --ollm-record, the marker, the fixture, a miss's failure,
run in inner sessions with pytester."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.ollm_real_providers

TEST_FILE = """
import os

import ollm
import pytest
from ollm_ollama import OllamaProvider
from ollm_testutils import FakeOllamaServer, OllamaReply

PROMPT = os.environ.get("PROMPT", "Why is the sky blue?")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_chat(ollm_cassette, anyio_backend):
    # The upstream stands in for a real server; replaying never reaches it.
    with FakeOllamaServer() as upstream:
        upstream.script(OllamaReply("Rayleigh scattering."))
        provider = OllamaProvider(host=ollm_cassette.url(upstream.url, wire="ollama"))
        client = ollm.ChatClient(provider=provider, model="llama3.2")
        result = await client.run(PROMPT)
        assert result.text == "Rayleigh scattering."
        assert len(upstream.chat_requests) == (1 if ollm_cassette.recording else 0)
        print("MODE", ollm_cassette.mode)


@pytest.mark.ollm_cassette("shared/named.json")
def test_marked(ollm_cassette):
    assert ollm_cassette.path.name == "named.json"


@pytest.mark.ollm_cassette
def test_marked_alone(request):
    # The marker alone gives the test its cassette.
    assert "ollm_cassette" in request.fixturenames
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("PROMPT", raising=False)
    pytester.makepyfile(test_weather=TEST_FILE)
    return pytester


def test_record_once_then_replay_and_a_changed_prompt_fails_with_the_diff(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = suite.runpytest_subprocess("--ollm-record=new_episodes", "-s", "-p", "no:randomly")
    recorded.assert_outcomes(passed=3)
    assert "MODE new_episodes" in recorded.stdout.str()
    path = suite.path / "cassettes" / "test_weather" / "test_chat-asyncio.json"
    episodes = json.loads(path.read_text())["episodes"]
    assert episodes[-1]["request"]["body"]["messages"][-1]["content"] == "Why is the sky blue?"

    replayed = suite.runpytest_subprocess("-s")
    replayed.assert_outcomes(passed=3)
    assert "MODE none" in replayed.stdout.str()

    monkeypatch.setenv("PROMPT", "Why is the sea blue?")
    result = suite.runpytest_subprocess("-k", "test_chat")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "CassetteMiss" in out
    assert '-        "content": "Why is the sky blue?"' in out
    assert '+        "content": "Why is the sea blue?"' in out
    command = "pytest --ollm-record=new_episodes 'test_weather.py::test_chat[asyncio]'"
    assert f"record again: {command}" in out


def test_ci_replays_whatever_the_option_says(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest_subprocess("--ollm-record=all", "-k", "test_chat", "-W", "default")
    # No recording, and no upstream asked: a miss, with the command to record.
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "--ollm-record is ignored because CI is set" in out
    assert "no such file yet" in out
    assert not (suite.path / "cassettes").exists()


def test_the_option_takes_only_the_three_modes(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--ollm-record=sometimes")
    assert result.ret != 0
    assert "invalid choice: 'sometimes'" in result.stderr.str()
