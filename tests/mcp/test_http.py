"""The demo server over Streamable HTTP (in a subprocess), with headers, on both backends."""

from __future__ import annotations

import logging
from types import ModuleType

import anyio
import pytest
from mcp_helpers import DEADLOCK, assert_details_only_in_debug
from runtime_helpers import assert_one_finish_last, collect

import ollm
import ollm_mcp
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


async def test_a_remote_server_answers_with_the_headers_given(
    anyio_backend: str, http_server: str, demo: ModuleType
) -> None:
    headers = {"Authorization": "Bearer demo"}
    server = ollm_mcp.MCPServer("web", url=http_server, headers=headers)
    # The same server again, with a timeout for the call that never ends (only for it:
    # the others may take as long as a busy machine makes them).
    timed = ollm_mcp.MCPServer("timed", url=http_server, headers=headers, tool_timeout=0.5)
    provider = ScriptedProvider(
        Reply(
            tool_calls=[
                ("web_add", {"a": 40, "b": 2}),
                ("web_screenshot", {}),
                ("timed_slow", {}),
            ]
        ),
        "Done.",
    )
    async with ollm.ChatClient(
        ollm.Registries(), provider=provider, tools=[server, timed]
    ) as client:
        with anyio.fail_after(DEADLOCK):
            events = await collect(client.chat("go"))
    add, shot, slow = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert add.result == "42"
    assert shot.images == (ollm.ImagePart(demo.PNG, "image/png"),)
    assert slow.error_code == "TOOL_TIMEOUT"


async def test_an_answer_nested_too_deep_to_read_is_the_calls_error_at_once(
    anyio_backend: str, http_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As over stdio: the call's error says why, at once; no traceback but in the debug log."""
    server = ollm_mcp.MCPServer(
        "web", url=http_server, headers={"Authorization": "Bearer demo"}, tool_timeout=3600
    )
    provider = ScriptedProvider(Reply(tool_calls=[("web_nested", {"levels": 250})]), "Done.")
    with caplog.at_level(logging.DEBUG):
        async with ollm.ChatClient(ollm.Registries(), provider=provider, tools=[server]) as client:
            with anyio.fail_after(DEADLOCK):
                events = await collect(client.chat("go"))
    [deep] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert deep.error_code == "MCP_SERVER_ERROR"
    assert deep.result.startswith(
        "Tool 'web_nested' failed: MCP server 'web' answered the call, but its answer nests "
        "deeper than about 200 levels, the most the MCP SDK's JSON parser reads, so the "
        "result is lost."
    )
    assert_one_finish_last(events, "stop")
    assert_details_only_in_debug(caplog.records)


async def test_a_refused_or_unreachable_server_is_a_clear_error(
    anyio_backend: str, http_server: str
) -> None:
    client = ollm.ChatClient(ollm.Registries(), provider=ScriptedProvider(repeat_last=True))
    for server, detail, step in (
        (
            ollm_mcp.MCPServer("web", url=http_server),
            "(HTTP 401)",
            "It wants credentials: check the headers (an Authorization token?).",
        ),
        (
            ollm_mcp.MCPServer("web", url="http://127.0.0.1:9/mcp"),
            "ConnectError",
            "Check the URL, the headers and that the server is running.",
        ),
    ):
        with anyio.fail_after(DEADLOCK):
            events = await collect(client.chat("hi", tools=[server]))
        [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
        assert error.code == "MCP_SERVER_FAILED"
        assert error.message.startswith(
            f"MCP server 'web' could not be started or reached ({server.describe()}): "
        )
        assert detail in error.message
        assert error.message.endswith(step)
