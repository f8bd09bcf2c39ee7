"""An MCP server built with the SDK, run in this process over in-memory JSON-RPC streams,
offered through ChatClient."""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

import anyio
import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, collect

import ollm
import ollm_mcp
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio
# A hang guard only: nothing here measures time.
DEADLOCK = 60


def calling(*calls: tuple[str, dict[str, Any]]) -> Reply:
    return Reply(tool_calls=list(calls))


def results(events: list[ollm.ChatEvent]) -> list[ollm.ToolCallResultEvent]:
    return [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]


def chat_client(provider: ScriptedProvider, **kwargs: Any) -> ollm.ChatClient:
    return ollm.ChatClient(ollm.Registries(), provider=provider, **kwargs)


async def test_the_tools_are_offered_prefixed_with_their_schemas(
    anyio_backend: str, demo: ModuleType
) -> None:
    server = ollm_mcp.MCPServer("demo", server=demo.build())
    provider = ScriptedProvider("Hello.")
    async with chat_client(provider, tools=[server]) as client:
        await collect(client.chat("hi"))
    schemas = {tool.name: tool for tool in provider.requests[0].tools}
    assert list(schemas) == [
        "demo_add",
        "demo_echo",
        "demo_screenshot",
        "demo_rows",
        "demo_refuse",
        "demo_slow",
        "demo_die",
        "demo_search",
        "demo_nested",
    ]
    assert schemas["demo_add"].description == "Add two whole numbers."
    assert schemas["demo_add"].parameters == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    # A parameter called title is kept; the title keywords of the SDK's schema are not.
    assert schemas["demo_echo"].parameters["properties"] == {
        "text": {"type": "string"},
        "title": {"type": "string", "default": ""},
    }


async def test_text_json_images_and_errors_reach_the_model(
    anyio_backend: str, demo: ModuleType
) -> None:
    server = ollm_mcp.MCPServer("demo", server=demo.build())
    provider = ScriptedProvider(
        calling(
            ("demo_add", {"a": 2, "b": 3}),
            ("demo_rows", {}),
            ("demo_screenshot", {}),
            ("demo_refuse", {"reason": "not today"}),
        ),
        "Done.",
        capabilities=ollm.ModelCapabilities(vision=True),
    )
    async with chat_client(provider, tools=[server]) as client:
        with anyio.fail_after(DEADLOCK):
            events = await collect(client.chat("go"))
    assert_one_finish_last(events, "stop")
    add, rows, shot, refused = results(events)
    assert (add.result, add.is_error) == ("5", False)
    assert rows.result == '{"rows":2,"names":["a","b"]}'
    assert shot.images == (ollm.ImagePart(demo.PNG, "image/png"),)
    assert (refused.is_error, refused.error_code) == (True, "TOOL_FAILED")
    assert "refused: not today" in refused.result
    tool_messages = provider.requests[1].messages[-4:]
    assert [m.role for m in tool_messages] == ["tool"] * 4
    assert tool_messages[2].images == (ollm.ImagePart(demo.PNG, "image/png"),)
    assert tool_messages[3].is_error
    assert_history_valid(client.conversation)


async def test_arguments_are_checked_against_the_schema_before_the_call(
    anyio_backend: str, demo: ModuleType
) -> None:
    server = ollm_mcp.MCPServer("demo", server=demo.build())
    provider = ScriptedProvider(calling(("demo_add", {"a": "two", "b": 3})), "Oops.")
    async with chat_client(provider, tools=[server]) as client:
        events = await collect(client.chat("go"))
    [bad] = results(events)
    # The server's own check would have been an is_error result (TOOL_FAILED).
    assert bad.error_code == "INVALID_ARGUMENTS"
    assert bad.result == (
        "Invalid arguments for tool 'demo_add': 'two' is not of type 'integer' - at $.a. "
        "Expected: a (integer, required), b (integer, required)."
    )


async def test_an_aborted_chat_cancels_the_call_on_the_server(
    anyio_backend: str, demo: ModuleType
) -> None:
    started, cancelled = anyio.Event(), anyio.Event()
    server = ollm_mcp.MCPServer("demo", server=demo.build(started=started, cancelled=cancelled))
    provider = ScriptedProvider(calling(("demo_slow", {})), "never")
    async with chat_client(provider, tools=[server]) as client:
        stream = client.chat("wait")

        async def abort_when_started() -> None:
            await started.wait()
            stream.abort()

        with anyio.fail_after(DEADLOCK):
            async with anyio.create_task_group() as group:
                group.start_soon(abort_when_started)
                events = await collect(stream)
            # The server's handler was cancelled by MCP's notifications/cancelled.
            await cancelled.wait()
    assert_one_finish_last(events, "cancelled")
    [result] = results(events)
    assert result.error_code == "CANCELLED"
    assert_history_valid(client.conversation)


async def test_a_call_past_its_timeout_is_cancelled_on_the_server(
    anyio_backend: str, demo: ModuleType
) -> None:
    cancelled = anyio.Event()
    server = ollm_mcp.MCPServer("demo", server=demo.build(cancelled=cancelled), tool_timeout=0.2)
    provider = ScriptedProvider(calling(("demo_slow", {})), "It took too long.")
    async with chat_client(provider, tools=[server]) as client:
        with anyio.fail_after(DEADLOCK):
            events = await collect(client.chat("wait"))
            await cancelled.wait()
    [result] = results(events)
    assert (result.error_code, result.result) == (
        "TOOL_TIMEOUT",
        "Tool 'demo_slow' did not finish within 0.2 seconds.",
    )
    assert_one_finish_last(events, "stop")


async def test_servers_with_the_same_tool_names_stay_apart(
    anyio_backend: str, demo: ModuleType
) -> None:
    first = ollm_mcp.MCPServer("first", server=demo.build("first"))
    second = ollm_mcp.MCPServer("second", server=demo.build("second"))
    provider = ScriptedProvider(
        calling(("first_search", {"query": "x"}), ("second_search", {"query": "x"})), "Both."
    )
    async with chat_client(provider, toolsets=[first, second], tools=["*_search"]) as client:
        events = await collect(client.chat("search"))
    assert [tool.name for tool in provider.requests[0].tools] == ["first_search", "second_search"]
    assert [r.result for r in results(events)] == ["first found x", "second found x"]


async def test_a_glob_opens_only_the_servers_it_can_match(
    anyio_backend: str, demo: ModuleType
) -> None:
    wanted = ollm_mcp.MCPServer("wanted", server=demo.build("wanted"))
    # Starting this one would fail the chat: the glob must leave it alone.
    other = ollm_mcp.MCPServer("other", command="/nonexistent/mcp-server")
    provider = ScriptedProvider("ok")
    async with chat_client(provider, toolsets=[wanted, other], tools=["wanted_*"]) as client:
        events = await collect(client.chat("hi"))
    assert_one_finish_last(events, "stop")
    assert len(provider.requests[0].tools) == 9


async def test_a_tool_that_runs_only_as_a_task_is_left_out_in_one_line(
    anyio_backend: str, demo: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """ollm makes plain calls only: a tool whose execution.taskSupport is "required"
    would fail every one of them (-32601), so it is not offered, and a warning says so."""
    server = ollm_mcp.MCPServer("demo", server=demo.build(tasks=True))
    provider = ScriptedProvider("Hello.")
    with caplog.at_level(logging.WARNING):
        async with chat_client(provider, tools=[server]) as client:
            await collect(client.chat("hi"))
    offered = [tool.name for tool in provider.requests[0].tools]
    assert "demo_add" in offered
    assert "demo_report" not in offered
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "MCP server 'demo': tools that run only as MCP tasks are left out (ollm does not "
        "start tasks): 'report'"
    ]
