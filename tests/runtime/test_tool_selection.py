"""select-tools: with many tools offered, each request carries only the ones that matter."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import assert_one_finish_last, client, collect

import ollm
from ollm.middleware import ToolSelection
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

TOPICS = [
    "calendar event", "email message", "spreadsheet cell", "database row", "image file",
    "audio clip", "video frame", "invoice total", "shipping label", "user account",
]  # fmt: skip


def _tools() -> list[ollm.Tool]:
    """120 tools: 119 about other things, and one that fetches the weather."""

    def noop(**kwargs: Any) -> str:
        return "done"

    tools = [
        ollm.Tool.from_schema(
            ollm.ToolSchema(
                f"{verb}_{topic.replace(' ', '_')}_{n}",
                f"{verb.capitalize()} a {topic} in the workspace.",
                {"type": "object", "properties": {"id": {"type": "string"}}},
            ),
            noop,
        )
        for n, (verb, topic) in enumerate(
            (verb, topic)
            for verb in ("create", "delete", "list", "update", "archive", "copy")
            for topic in TOPICS * 2
        )
    ][:119]
    weather = ollm.Tool.from_schema(
        ollm.ToolSchema(
            "get_forecast",
            "Get the weather forecast (temperature, rain, wind) for a city.",
            {"type": "object", "properties": {"city": {"type": "string"}}},
        ),
        lambda city: "sunny",
    )
    return [*tools[:60], weather, *tools[60:]]


async def test_each_request_carries_at_most_n_tools_with_the_relevant_one(
    anyio_backend: str,
) -> None:
    tools = _tools()
    assert len(tools) == 120
    other = tools[-1].name  # irrelevant, but called: kept from then on
    provider = ScriptedProvider(
        Reply(tool_calls=[("get_forecast", {"city": "Oslo"})]),
        Reply(tool_calls=[(other, {"id": "x"})]),
        Reply("Sunny in Oslo."),
    )
    chat_client = client(provider, tools=tools, middleware=[ToolSelection(16)], max_turns=5)
    events = await collect(chat_client.chat("What is the weather forecast in Oslo? Will it rain?"))
    assert_one_finish_last(events, "stop")
    for request in provider.requests:
        names = [tool.name for tool in request.tools]
        assert len(names) <= 16
        assert "get_forecast" in names  # relevant, then already called
    # Tools called in this chat stay offered.
    assert other not in [t.name for t in provider.requests[0].tools]
    assert other in [t.name for t in provider.requests[2].tools]


async def test_the_always_list_is_kept(anyio_backend: str) -> None:
    provider = ScriptedProvider("ok")
    tools = _tools()
    selection = ToolSelection(4, always=[tools[-1].name])
    await collect(client(provider, tools=tools, middleware=[selection]).chat("weather?"))
    names = [t.name for t in provider.requests[0].tools]
    assert len(names) == 4
    assert tools[-1].name in names
    assert "get_forecast" in names


async def test_few_tools_are_sent_as_they_are(anyio_backend: str) -> None:
    provider = ScriptedProvider("ok")
    few = _tools()[:10]
    await collect(client(provider, tools=few, middleware=[ToolSelection(16)]).chat("hi"))
    assert [t.name for t in provider.requests[0].tools] == [t.name for t in few]


def test_max_tools_is_checked() -> None:
    with pytest.raises(ValueError, match="max_tools"):
        ToolSelection(0)
