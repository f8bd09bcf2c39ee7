"""The pack's tests: its tools directly, through a chat, and through plugin discovery."""

from __future__ import annotations

import pytest
from ollm_example_tools.tools import TOOLS

import ollm
from ollm.plugins import discover
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


def test_the_schemas_come_from_the_type_hints() -> None:
    schemas = {tool.name: tool.schema for tool in TOOLS}
    assert sorted(schemas["change_case"].parameters["properties"]["case"]["enum"]) == [
        "lower",
        "title",
        "upper",
    ]
    assert schemas["repeat"].parameters["properties"]["times"]["maximum"] == 10


async def test_a_model_calls_the_tools_in_a_chat() -> None:
    call = ollm.ToolCall("call_1", "word_count", {"text": "the quick brown fox"})
    provider = ScriptedProvider(Reply(tool_calls=[call]), Reply("Four words."))
    client = ollm.ChatClient(ollm.Registries(), provider=provider, tools=TOOLS)
    result = await client.run("How many words?")
    assert result.text == "Four words."
    assert result.tool_results[0].result == '{"words":4,"lines":1,"characters":19}'


async def test_bad_arguments_go_back_to_the_model() -> None:
    call = ollm.ToolCall("call_1", "repeat", {"text": "hi", "times": 99})
    provider = ScriptedProvider(Reply(tool_calls=[call]), Reply("Sorry."))
    client = ollm.ChatClient(ollm.Registries(), provider=provider, tools=TOOLS)
    result = await client.run("Repeat hi 99 times")
    assert result.tool_results[0].is_error
    assert "times" in result.tool_results[0].result


def test_discovery_finds_the_pack_through_its_entry_point() -> None:
    registries = discover()
    assert {"word_count", "change_case", "repeat"} <= set(registries.tools.list())
    record = next(p for p in registries.plugins if p.name == "example-tools")
    assert record.status == "loaded"
