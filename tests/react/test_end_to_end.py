"""End to end: a real Ollama provider, a fake Ollama server over HTTP, a model without tools.

The model answers a tools request with ``400 ... does not support tools``, as a real
server does; the chat switches to ReAct and completes Thought, Action, Observation and
Final Answer with a real tool (the toolbox's ``calculate``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

import ollm
from ollm.toolbox import calculate
from ollm_ollama import OllamaProvider
from ollm_testutils import FakeOllamaServer, OllamaReply

pytestmark = pytest.mark.anyio

ACTION = [
    "Thought: I should compute it.\nAct",
    'ion: calculate\nAction Input: {"expression": ',
    '"17 * 23"}',
    "\nObservation: 400",  # the model runs on past the stop sequence
]
ANSWER = ["Thought: The tool says 391.\nFinal ", "Answer: 17 times 23 is ", "391."]
# A hang guard only: nothing here measures time.
DEADLOCK = 60


@pytest.fixture
async def server() -> AsyncIterator[FakeOllamaServer]:
    async with FakeOllamaServer(models=False) as server:
        server.add_model("gemma2", ["completion"], parameters={"stop": ["<end_of_turn>"]})
        yield server


@pytest.fixture
async def provider(server: FakeOllamaServer) -> AsyncIterator[OllamaProvider]:
    provider = OllamaProvider(server.url, environ={})
    yield provider
    await provider.aclose()


def chat_client(provider: OllamaProvider, registries: ollm.Registries) -> ollm.ChatClient:
    return ollm.ChatClient(registries, provider=provider, model="gemma2", tools=[calculate])


def of(kind: type, events: list[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def strategy_notices(events: list[Any]) -> list[ollm.NoticeEvent]:
    # The provider may also say that the model is loading.
    return [e for e in of(ollm.NoticeEvent, events) if e.kind == "strategy"]


async def test_does_not_support_tools_switches_to_react_and_completes(
    server: FakeOllamaServer, provider: OllamaProvider, registries: ollm.Registries, collect: Any
) -> None:
    # The model's capabilities are unknown (as with an older server), so the first
    # request offers the tools natively and the server's own check answers 400.
    server.fail(500, "capabilities unavailable", path="/api/show", times=1)
    server.script(OllamaReply(ACTION, hang=True), OllamaReply(ANSWER))
    client = chat_client(provider, registries)
    with anyio.fail_after(DEADLOCK):
        events = await collect(client.chat("What is 17 * 23?"))

    assert strategy_notices(events) == [
        ollm.NoticeEvent(
            "gemma2 does not support native tool calling: switched to ReAct.", "strategy"
        )
    ]
    assert not of(ollm.ErrorEvent, events)
    [result] = of(ollm.ToolCallResultEvent, events)
    assert result.call == ollm.ToolCall("react_1", "calculate", {"expression": "17 * 23"})
    assert (result.result, result.is_error) == ("391", False)
    assert "".join(e.text for e in of(ollm.TextEvent, events)) == "17 times 23 is 391."
    assert "".join(e.text for e in of(ollm.ThinkingEvent, events)) == (
        "I should compute it.The tool says 391."
    )
    assert events[-1].reason == "stop"

    native, action, answer = server.chat_requests
    assert native.status == 400
    assert "tools" in native.json
    for react in (action, answer):
        body = react.json
        assert "tools" not in body
        assert body["options"]["stop"] == ["<end_of_turn>", "\nObservation:"]
        system = body["messages"][0]
        assert system["role"] == "system"
        assert system["content"].startswith("You can use tools to answer.")
        assert "- calculate: Evaluate an arithmetic expression" in system["content"]
    # The generation was stopped as soon as the call's JSON closed.
    assert await action.wait_async()
    assert action.disconnected
    assert [(m["role"], m["content"]) for m in answer.json["messages"][1:]] == [
        ("user", "What is 17 * 23?"),
        (
            "assistant",
            "Thought: I should compute it.\nAction: calculate\n"
            'Action Input: {"expression": "17 * 23"}',
        ),
        ("user", "Observation: 391"),
    ]
    history = client.conversation.messages
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[-1] == ollm.Message.assistant(
        "17 times 23 is 391.", thinking="The tool says 391."
    )

    # Remembered: the next chat with this model goes straight to ReAct.
    server.script(OllamaReply("Final Answer: You are welcome."))
    with anyio.fail_after(DEADLOCK):
        events = await collect(client.chat("Thanks!"))
    assert strategy_notices(events) == [
        ollm.NoticeEvent("gemma2 cannot call tools natively: using ReAct.", "strategy")
    ]
    assert "tools" not in server.chat_requests[-1].json
    assert "".join(e.text for e in of(ollm.TextEvent, events)) == "You are welcome."


async def test_a_model_known_to_lack_tools_gets_react_from_the_start(
    server: FakeOllamaServer, provider: OllamaProvider, registries: ollm.Registries, collect: Any
) -> None:
    server.script(OllamaReply(ACTION, hang=True), OllamaReply(ANSWER))
    with anyio.fail_after(DEADLOCK):
        events = await collect(chat_client(provider, registries).chat("What is 17 * 23?"))
    assert strategy_notices(events) == [
        ollm.NoticeEvent("gemma2 cannot call tools natively: using ReAct.", "strategy")
    ]
    assert [r.result for r in of(ollm.ToolCallResultEvent, events)] == ["391"]
    assert "".join(e.text for e in of(ollm.TextEvent, events)) == "17 times 23 is 391."
    assert all("tools" not in r.json for r in server.chat_requests)
    assert len(server.chat_requests) == 2


async def test_without_react_the_chat_says_to_install_it(
    server: FakeOllamaServer, provider: OllamaProvider, collect: Any
) -> None:
    server.fail(500, "capabilities unavailable", path="/api/show", times=1)
    with anyio.fail_after(DEADLOCK):
        events = await collect(chat_client(provider, ollm.Registries()).chat("17 * 23?"))
    [error] = of(ollm.ErrorEvent, events)
    assert error.code == "TOOLS_UNSUPPORTED"
    assert "does not support tools" in error.message
    assert "pip install ollm-react" in error.message
    assert events[-1].reason == "error"
