"""Fixtures of the ReAct tests: registries with the strategy, tools that record their calls."""

from __future__ import annotations

import itertools
import random
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

import pytest

import ollm
from ollm_react import ReActStrategy, StreamScanner

Collect = Callable[[AsyncIterable[Any]], Awaitable[list[Any]]]


class ToolCalls:
    """The calls the test tools received, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []


@pytest.fixture
def calls() -> ToolCalls:
    return ToolCalls()


@pytest.fixture
def tools(calls: ToolCalls) -> list[ollm.Tool]:
    """get_weather(city, units?), search(query), current_time()."""

    def get_weather(city: str, units: str = "celsius") -> dict[str, Any]:
        """Get the current weather of a city.

        Args:
            city: The city, for example "Paris".
            units: "celsius" or "fahrenheit".
        """
        calls.calls.append(("get_weather", {"city": city, "units": units}))
        return {"city": city, "temperature": 21, "units": units, "sky": "sunny"}

    def search(query: str) -> str:
        """Search the web.

        Args:
            query: What to look for.
        """
        calls.calls.append(("search", {"query": query}))
        return f"Top result for {query}: ollm is a Python runtime."

    def current_time() -> str:
        """Get the current time."""
        calls.calls.append(("current_time", {}))
        return "12:00"

    return [ollm.Tool.from_function(f) for f in (get_weather, search, current_time)]


@pytest.fixture
def schemas(tools: list[ollm.Tool]) -> tuple[ollm.ToolSchema, ...]:
    return tuple(tool.schema for tool in tools)


@pytest.fixture
def registries() -> ollm.Registries:
    """Registries with ReAct registered by hand (no plugin discovery)."""
    registries = ollm.Registries()
    registries.strategies.register(
        ollm.StrategySpec("react", ReActStrategy, "Tool calling through the ReAct text protocol")
    )
    return registries


@pytest.fixture
def collect() -> Collect:
    """Read a stream of events to its end."""

    async def collect(stream: AsyncIterable[Any]) -> list[Any]:
        return [event async for event in stream]

    return collect


def weather_schema() -> ollm.ToolSchema:
    """get_weather(city), with nothing else allowed."""
    return ollm.ToolSchema(
        name="get_weather",
        description="The weather of a city.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    )


def stream_scan(chunks: list[str]) -> tuple[list[tuple[str, str]], StreamScanner]:
    """What a StreamScanner shows for these chunks (merged by kind), and the scanner."""
    scanner = StreamScanner()
    outputs = [out for chunk in chunks for out in scanner.feed(chunk)] + scanner.end()
    merged: list[tuple[str, str]] = []
    for kind, text in outputs:
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + text)
        elif text:
            merged.append((kind, text))
    return merged, scanner


def chunkings(text: str) -> list[list[str]]:
    """1 character, 3 characters, seeded random splits, and whole."""
    rng = random.Random(len(text))
    randoms = []
    for _ in range(6):
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 9))))
        randoms.append([text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])])
    return [list(text), [text[i : i + 3] for i in range(0, len(text), 3)], *randoms, [text]]


def asking(tools: tuple[ollm.ToolSchema, ...], **fields: Any) -> ollm.ProviderRequest:
    """A request asking "question" with these tools (and any other fields)."""
    return ollm.ProviderRequest(
        model="tiny", messages=(ollm.Message.user("question"),), tools=tools, **fields
    )
