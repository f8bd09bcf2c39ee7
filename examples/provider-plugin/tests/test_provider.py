"""The example provider's tests: the contract through ChatClient, and discovery."""

from __future__ import annotations

import pytest
from ollm_example_provider.provider import PirateProvider

import ollm
from ollm.plugins import discover

pytestmark = pytest.mark.anyio


@ollm.tool
def bury(place: str) -> str:
    """Bury the treasure.

    Args:
        place: Where.
    """
    return f"buried on {place}"


async def test_it_streams_and_the_runtime_keeps_the_history() -> None:
    client = ollm.ChatClient(ollm.Registries(), provider=PirateProvider())
    events = [e async for e in client.chat("hello my friend")]
    assert "".join(e.text for e in events if isinstance(e, ollm.TextEvent)) == "ahoy me matey"
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.usage is not None
    assert finish.usage.completion_tokens == 3
    assert [m.text for m in client.conversation.messages] == ["hello my friend", "ahoy me matey"]


async def test_a_tool_call_runs_and_its_result_comes_back() -> None:
    client = ollm.ChatClient(ollm.Registries(), provider=PirateProvider(), tools=[bury])
    result = await client.run('call bury {"place": "Skull Island"}')
    assert [r.result for r in result.tool_results] == ["buried on Skull Island"]
    assert result.text == "the tool said: buried on Skull Island"


async def test_abort_stops_it_at_once() -> None:
    client = ollm.ChatClient(ollm.Registries(), provider=PirateProvider(delay=0.05))
    async with client.chat("one two three four five six seven eight") as events:
        async for event in events:
            if isinstance(event, ollm.TextEvent):
                events.abort()
    assert client.conversation.messages[-1].incomplete


async def test_an_unknown_model_is_an_error_event_never_an_exception() -> None:
    client = ollm.ChatClient(ollm.Registries(), provider=PirateProvider(), model="kraken")
    result = await client.run("hello")
    assert result.error is not None
    assert result.error.code == "MODEL_NOT_FOUND"


# ollm-testutils keeps installed providers out of tests unless a test asks for them.
@pytest.mark.ollm_real_providers
def test_discovery_finds_the_provider_through_its_entry_point() -> None:
    registries = discover()
    provider = registries.providers.get("pirate")
    assert provider.name == "pirate"
