"""Cassettes: record a provider's traffic through a fake upstream, replay it with the
upstream stopped, through the production provider code over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import ollm
from ollm_gemini import GeminiProvider
from ollm_ollama import OllamaProvider
from ollm_openai import OpenAIProvider
from ollm_testutils import (
    FakeGeminiServer,
    FakeOllamaServer,
    FakeOpenAIServer,
    GeminiReply,
    OllamaReply,
    OpenAIReply,
)
from ollm_testutils.cassette import Cassette
from ollm_testutils.httpserver import FakeServer

pytestmark = pytest.mark.anyio

# An address where nothing listens: a replay that reached its upstream would fail.
NOWHERE = "http://127.0.0.1:9"


def get_weather(city: str) -> str:
    """Get the weather of a city.

    Args:
        city: The city.
    """
    return f"Sunny in {city}"


def started(wire: str) -> tuple[FakeServer, str]:
    """A fake upstream of ``wire`` scripted for a tool round, and its base URL."""
    if wire == "ollama":
        ollama = FakeOllamaServer()
        ollama.script(
            OllamaReply(tool_calls=[("get_weather", {"city": "Paris"})]),
            OllamaReply(["It is ", "sunny ☀ in Paris."]),
        )
        return ollama.start(), ollama.url
    if wire == "openai":
        openai = FakeOpenAIServer(models=["gpt-test"])
        openai.script(
            OpenAIReply(tool_calls=[("get_weather", {"city": "Paris"})]),
            OpenAIReply(["It is ", "sunny ☀ in Paris."]),
        )
        return openai.start(), f"{openai.url}/v1"
    gemini = FakeGeminiServer()
    gemini.script(
        GeminiReply(calls=[("get_weather", {"city": "Paris"})]),
        GeminiReply(["It is ", "sunny ☀ in Paris."]),
    )
    return gemini.start(), gemini.url


PROVIDERS: dict[str, Callable[[str], ollm.ProviderAdapter]] = {
    "ollama": lambda url: OllamaProvider(host=url),
    "openai": lambda url: OpenAIProvider(url, api_key="sk-test"),
    "gemini": lambda url: GeminiProvider("test-key", base_url=url),
}
MODELS = {"ollama": "llama3.2", "openai": "gpt-test", "gemini": "gemini-2.5-flash"}


async def chat(cassette: Cassette, wire: str, upstream: str, prompt: str) -> list[Any]:
    provider = PROVIDERS[wire](cassette.url(upstream, wire=wire))
    client = ollm.ChatClient(provider=provider, model=MODELS[wire], tools=[get_weather])
    async with client.chat(prompt) as stream:
        return [event async for event in stream]


def stable(events: list[Any]) -> list[Any]:
    """The events without what the clock decides (timings); all else must be equal."""
    timed = {"usage", "duration_ms"}
    ids: dict[str, str] = {}

    def numbered(value: Any) -> Any:
        # A call's id that the client made up (Gemini sends none) is new each run.
        if isinstance(value, dict):
            return {
                k: ids.setdefault(v, f"id-{len(ids)}") if k == "id" else numbered(v)
                for k, v in value.items()
                if k not in timed
            }
        if isinstance(value, list):
            return [numbered(v) for v in value]
        return value

    return [numbered(msgspec.to_builtins(event)) for event in events]


def chat_episodes(path: Path) -> list[dict[str, Any]]:
    episodes = json.loads(path.read_text())["episodes"]
    return [
        e
        for e in episodes
        if any(word in e["request"]["path"].lower() for word in ("chat", "generatecontent"))
    ]


@pytest.mark.parametrize("wire", ["ollama", "openai", "gemini"])
async def test_a_tool_round_replays_with_the_upstream_stopped(tmp_path: Path, wire: str) -> None:
    path = tmp_path / "chat.json"
    upstream_server, upstream = started(wire)
    with upstream_server, Cassette(path, mode="all") as cassette:
        recorded = await chat(cassette, wire, upstream, "Weather in Paris?")
    assert [e.result for e in recorded if isinstance(e, ollm.ToolCallResultEvent)] == [
        "Sunny in Paris"
    ]
    assert "".join(e.text for e in recorded if isinstance(e, ollm.TextEvent)).endswith("Paris.")
    # Two chat requests in order: the second carries the tool's result.
    chats = chat_episodes(path)
    assert len(chats) == 2
    assert "Sunny in Paris" in json.dumps(chats[1]["request"])

    with Cassette(path, mode="none") as replay:
        replayed = await chat(replay, wire, upstream, "Weather in Paris?")
    replay.check()
    assert stable(replayed) == stable(recorded)
