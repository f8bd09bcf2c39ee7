"""The demo server as a subprocess over stdio: a chat through the Ollama provider against
the fake server, and every way a server can fail: it never starts, crashes at once,
hangs, dies mid-chat, or will not exit. Its process is always reaped."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_helpers import (
    DEADLOCK,
    DEMO,
    RAW,
    STARTUP_TIMEOUTS,
    assert_details_only_in_debug,
    gone,
    pids,
    wait_until_gone,
)
from runtime_helpers import assert_history_valid, assert_one_finish_last, collect

import ollm
import ollm_mcp
from ollm_ollama import OllamaProvider
from ollm_testutils import FakeOllamaServer, OllamaReply
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX process checks"),
]


def demo_server(record: Path, mode: str = "normal", **options: Any) -> ollm_mcp.MCPServer:
    env = {"DEMO_MODE": mode, "DEMO_RECORD": str(record)}
    return ollm_mcp.MCPServer("demo", command=sys.executable, args=[DEMO], env=env, **options)


def errors(events: list[ollm.ChatEvent]) -> list[ollm.ErrorEvent]:
    return [e for e in events if isinstance(e, ollm.ErrorEvent)]


@pytest.fixture
async def fake_ollama() -> AsyncIterator[FakeOllamaServer]:
    async with FakeOllamaServer() as server:
        yield server


async def test_a_chat_through_the_ollama_provider_calls_the_server(
    anyio_backend: str, fake_ollama: FakeOllamaServer, tmp_path: Path
) -> None:
    record = tmp_path / "record"
    fake_ollama.script(
        OllamaReply(tool_calls=[("demo_add", {"a": 17, "b": 25})]), OllamaReply(["It is ", "42."])
    )
    provider = OllamaProvider(fake_ollama.url, environ={})
    client = ollm.ChatClient(
        ollm.Registries(), provider=provider, model="llama3.2", tools=[demo_server(record)]
    )
    async with client:
        with anyio.fail_after(DEADLOCK):
            result = await client.run("What is 17 + 25?")
        [pid] = pids(record)
        assert not gone(pid)
    assert gone(pid)
    assert (result.text, result.finish_reason) == ("It is 42.", "stop")
    first, second = (r.json for r in fake_ollama.chat_requests)
    assert "demo_add" in [t["function"]["name"] for t in first["tools"]]
    assert second["messages"][-1] == {
        "role": "tool",
        "content": "42",
        "tool_name": "demo_add",
        "tool_call_id": second["messages"][-2]["tool_calls"][0]["id"],
    }
    assert_history_valid(client.conversation)


async def test_a_server_that_crashes_at_start_is_a_clear_error(
    anyio_backend: str, tmp_path: Path
) -> None:
    record = tmp_path / "record"
    provider = ScriptedProvider("never")
    client = ollm.ChatClient(ollm.Registries(), provider=provider)
    with anyio.fail_after(DEADLOCK):
        events = await collect(client.chat("hi", tools=[demo_server(record, "crash")]))
    assert_one_finish_last(events, "error")
    [error] = errors(events)
    assert error.code == "MCP_SERVER_FAILED"
    assert error.message.startswith("MCP server 'demo' stopped before it was ready (")
    assert "Its last words on stderr: demo server: cannot open the database." in error.message
    assert error.message.endswith("Run the command by hand to see why.")
    assert not provider.requests
    assert all(gone(pid) for pid in pids(record))


async def test_a_server_that_never_answers_times_out_and_is_stopped(
    anyio_backend: str, tmp_path: Path
) -> None:
    client = ollm.ChatClient(ollm.Registries(), provider=ScriptedProvider("never"))
    for timeout in STARTUP_TIMEOUTS:
        # Its process id is known only if it got to write it before it was timed out.
        record = tmp_path / f"record-{timeout}"
        server = demo_server(record, "hang", startup_timeout=timeout)
        with anyio.fail_after(DEADLOCK + timeout):
            events = await collect(client.chat("hi", tools=[server]))
        [error] = errors(events)
        assert error.code == "MCP_SERVER_TIMEOUT"
        assert error.message.startswith(
            f"MCP server 'demo' did not answer within {timeout:g} seconds ("
        )
        assert error.message.endswith("or give it more time with startup_timeout_sec.")
        if pids(record):
            break
    [pid] = pids(record)
    assert gone(pid)


async def test_a_program_that_does_not_exist(anyio_backend: str) -> None:
    server = ollm_mcp.MCPServer("nope", command="/nonexistent/mcp-server")
    client = ollm.ChatClient(ollm.Registries(), provider=ScriptedProvider("never"))
    events = await collect(client.chat("hi", tools=[server]))
    [error] = errors(events)
    assert error.code == "MCP_SERVER_FAILED"
    assert error.message == (
        "MCP server 'nope' could not be started: the program '/nonexistent/mcp-server' was "
        "not found. Install it, or fix 'command' in the server's configuration."
    )


async def test_a_server_that_dies_mid_chat_is_a_tool_error_and_the_next_chat_restarts_it(
    anyio_backend: str, tmp_path: Path
) -> None:
    record = tmp_path / "record"
    provider = ScriptedProvider(
        Reply(tool_calls=[("demo_die", {})]),
        "It died.",
        Reply(tool_calls=[("demo_add", {"a": 1, "b": 1})]),
        "Two.",
    )
    async with ollm.ChatClient(
        ollm.Registries(), provider=provider, tools=[demo_server(record)]
    ) as client:
        with anyio.fail_after(DEADLOCK):
            first = await collect(client.chat("die"))
            [died] = [e for e in first if isinstance(e, ollm.ToolCallResultEvent)]
            assert died.error_code == "MCP_SERVER_STOPPED"
            assert died.result.startswith(
                "Tool 'demo_die' failed: MCP server 'demo' has stopped or its connection was lost"
            )
            assert "Its last words on stderr: demo server: dying on purpose." in died.result
            assert_one_finish_last(first, "stop")
            second = await collect(client.chat("add"))
        [added] = [e for e in second if isinstance(e, ollm.ToolCallResultEvent)]
        assert (added.result, added.is_error) == ("2", False)
        old, new = pids(record)
        # The first session winds down in the background while the chats go on.
        await wait_until_gone(old)
    assert gone(new)
    assert_history_valid(client.conversation)


async def test_a_server_that_ignores_the_end_of_its_input_is_terminated(
    anyio_backend: str, tmp_path: Path
) -> None:
    record = tmp_path / "record"
    provider = ScriptedProvider(Reply(tool_calls=[("demo_add", {"a": 1, "b": 2})]), "Three.")
    async with ollm.ChatClient(
        ollm.Registries(), provider=provider, tools=[demo_server(record, "slow-exit")]
    ) as client:
        with anyio.fail_after(DEADLOCK):
            await collect(client.chat("add"))
    [pid] = pids(record)
    assert gone(pid)


async def test_an_answer_nested_too_deep_to_read_is_the_calls_error_at_once(
    anyio_backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK's JSON parser stops at about 200 levels: that call fails at once, saying
    why (it used to wait for its timeout), the other call and the chat go on, and the
    SDK's traceback is only in the debug log."""
    provider = ScriptedProvider(
        Reply(tool_calls=[("demo_nested", {"levels": 250}), ("demo_nested", {"levels": 150})]),
        "Done.",
    )
    server = demo_server(tmp_path / "record", tool_timeout=3600)
    with caplog.at_level(logging.DEBUG):
        async with ollm.ChatClient(ollm.Registries(), provider=provider, tools=[server]) as client:
            with anyio.fail_after(DEADLOCK):
                events = await collect(client.chat("go"))
    deep, shallow = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert (deep.error_code, deep.result) == (
        "MCP_SERVER_ERROR",
        "Tool 'demo_nested' failed: MCP server 'demo' answered the call, but its answer nests "
        "deeper than about 200 levels, the most the MCP SDK's JSON parser reads, so the "
        "result is lost. If the server is yours, make its answers flatter or valid MCP; "
        "otherwise report it to its author.",
    )
    assert (shallow.result, shallow.is_error) == ("150 levels", False)
    assert_one_finish_last(events, "stop")
    assert_history_valid(client.conversation)
    assert_details_only_in_debug(caplog.records)


async def test_a_server_of_another_sdk_answering_too_deep_with_its_id_last(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A hand-written 2025-11-25 server: a tool that runs only as a task is left out in one
    warning, and an unreadable answer whose id comes after its result still fails its call
    at once (the other call of the turn gets its own answer)."""
    server = ollm_mcp.MCPServer("raw", command=sys.executable, args=[RAW], tool_timeout=3600)
    provider = ScriptedProvider(
        Reply(tool_calls=[("raw_deep", {"levels": 250}), ("raw_add", {"a": 1, "b": 2})]),
        "Done.",
    )
    with caplog.at_level(logging.WARNING):
        async with ollm.ChatClient(ollm.Registries(), provider=provider, tools=[server]) as client:
            with anyio.fail_after(DEADLOCK):
                events = await collect(client.chat("go"))
    assert [tool.name for tool in provider.requests[0].tools] == ["raw_deep", "raw_add"]
    assert [r.getMessage() for r in caplog.records] == [
        "MCP server 'raw': tools that run only as MCP tasks are left out (ollm does not "
        "start tasks): 'report'"
    ]
    deep, added = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert deep.error_code == "MCP_SERVER_ERROR"
    assert "its answer nests deeper than about 200 levels" in deep.result
    assert (added.result, added.is_error) == ("3", False)
    assert_one_finish_last(events, "stop")
