"""``ollm chat --schema ... --output-strategy tool`` on the fake Ollama and
OpenAI-compatible servers: the value alone on stdout from a forced call of
``final_result``, the request that forced it, and the names ``--output-strategy`` takes
(a wrong one stops before any request, naming those there are)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from cli_helpers import OLLM, ollm_env
from typed_fakes import Fake


@pytest.fixture(params=["ollama", "openai"])
def fake(request: pytest.FixtureRequest) -> Iterator[Fake]:
    with Fake(str(request.param)) as made:
        yield made


def chat(fake: Fake, *args: str) -> subprocess.CompletedProcess[str]:
    env = ollm_env(**fake.env())
    env["OLLM_LOGS"] = "off"
    return subprocess.run(
        [OLLM, "chat", "-p", fake.name, "-m", fake.model, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_the_value_of_the_forced_call_goes_to_stdout(fake: Fake) -> None:
    fake.script(fake.call("final_result", {"name": "Rex", "age": 3}))
    done = chat(fake, "--schema", "name, age int", "--output-strategy", "tool", "invent a dog")
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"name":"Rex","age":3}\n'
    (body,) = fake.bodies
    assert [t["function"]["name"] for t in body["tools"]] == ["final_result"]
    if fake.name == "openai":
        assert body["tool_choice"] == {"type": "function", "function": {"name": "final_result"}}
        assert "response_format" not in body
    else:
        assert "format" not in body


def test_a_correction_of_the_call_then_the_value(fake: Fake) -> None:
    fake.script(
        fake.call("final_result", {"name": "Rex", "age": "three"}),
        fake.call("final_result", {"name": "Rex", "age": 3}),
    )
    done = chat(fake, "--schema", "name, age int", "--output-strategy", "tool", "invent a dog")
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"name":"Rex","age":3}\n'
    assert "Call final_result again" in fake.last_user_text(fake.bodies[1])


def test_an_unknown_output_strategy_stops_before_any_request() -> None:
    with Fake("ollama") as fake:
        done = chat(fake, "--schema", "name", "--output-strategy", "tools", "invent a dog")
        assert fake.bodies == []
    assert done.returncode == 2
    assert "--output-strategy tools: no output strategy is named 'tools'" in done.stderr
    assert "Known: auto, native, tool, prompted" in done.stderr


def test_output_strategy_goes_with_schema() -> None:
    with Fake("ollama") as fake:
        done = chat(fake, "--output-strategy", "tool", "hi")
        assert fake.bodies == []
    assert done.returncode == 2
    assert "--output-strategy go with --schema SCHEMA" in done.stderr
