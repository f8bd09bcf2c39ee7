"""Across packages: `ollm chat` (core) + the Ollama provider + ReAct + the fake server.

A model that answers a tools request with HTTP 400 "does not support tools" still gets
its tool: the chat switches to ReAct, runs Thought, Action, Observation, Final Answer.
"""

from __future__ import annotations

import subprocess

import pytest
from cli_helpers import OLLM, ollm_env

import ollm
from ollm_testutils import FakeOllamaServer, OllamaReply

ACTION = 'Thought: I should compute it.\nAction: calculate\nAction Input: {"expression": "17 * 23"}'
ANSWER = "Thought: The tool says 391.\nFinal Answer: 17 times 23 is 391."


@pytest.fixture
def server() -> FakeOllamaServer:
    with FakeOllamaServer(models=False) as fake:
        fake.add_model("gemma2", ["completion"], parameters={"stop": ["<end_of_turn>"]})
        # Capabilities unknown (an older server): the first request offers tools natively.
        fake.fail(500, "capabilities unavailable", path="/api/show", times=1)
        yield fake


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_ollm_chat_switches_to_react_and_uses_the_tool(
    server: FakeOllamaServer, backend: str
) -> None:
    server.script(OllamaReply(ACTION), OllamaReply(ANSWER))
    result = subprocess.run(
        [OLLM, "--backend", backend, "chat", "-m", "gemma2", "-t", "calculate", "17 * 23?"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=ollm_env(OLLAMA_HOST=server.url),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "17 times 23 is 391.\n"
    assert "switched to ReAct" in result.stderr
    assert 'calculate(expression="17 * 23")' in result.stderr
    bodies = [r.json for r in server.chat_requests]
    assert "tools" in bodies[0]
    assert server.chat_requests[0].status == 400
    assert all("tools" not in body for body in bodies[1:])
    observation = bodies[-1]["messages"][-1]
    assert observation["role"] == "user"
    assert observation["content"].startswith("Observation: ")
    assert "391" in observation["content"]
    assert bodies[1]["options"]["stop"] == ["<end_of_turn>", "\nObservation:"]


def test_json_events_of_a_react_chat(server: FakeOllamaServer) -> None:
    server.script(OllamaReply(ACTION), OllamaReply(ANSWER))
    result = subprocess.run(
        [OLLM, "chat", "-m", "gemma2", "-t", "calculate", "--json", "17 * 23?"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=ollm_env(OLLAMA_HOST=server.url),
    )
    assert result.returncode == 0, result.stderr
    events = [ollm.decode_chat_event(line) for line in result.stdout.splitlines()]
    assert [type(e).__name__ for e in events if not isinstance(e, ollm.TextEvent)] == [
        "NoticeEvent",  # loading the model
        "NoticeEvent",  # switched to ReAct
        "ThinkingEvent",
        "ToolCallStartEvent",
        "ToolCallResultEvent",
        "TurnCompleteEvent",
        "ThinkingEvent",
        "TurnCompleteEvent",
        "FinishEvent",
    ]
    assert "".join(e.text for e in events if isinstance(e, ollm.TextEvent)) == (
        "17 times 23 is 391."
    )
