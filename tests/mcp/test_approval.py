"""An MCP server's annotations are the approval defaults of its tools: a destructive tool
asks a person first, a read-only one runs, and a chat's own rules come before both."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from runtime_helpers import assert_history_valid, collect

import ollm
import ollm_mcp
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


def files_server(removed: list[str]) -> MCPServer:
    server = MCPServer("files")

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def remove(path: str) -> str:
        """Delete a file."""
        removed.append(path)
        return f"removed {path}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def read(path: str) -> str:
        """Read a file."""
        return f"the text of {path}"

    @server.tool()
    def touch(path: str) -> str:
        """Create a file (no annotations)."""
        return f"touched {path}"

    return server


def calls(*names: str) -> Reply:
    return Reply(tool_calls=[(f"files_{name}", {"path": "/tmp/a"}) for name in names])


async def test_a_destructive_tool_asks_by_default_and_a_read_only_one_runs(
    anyio_backend: str,
) -> None:
    removed: list[str] = []
    server = ollm_mcp.MCPServer("files", server=files_server(removed))
    provider = ScriptedProvider(calls("remove", "read", "touch"), Reply("Done."))
    asked: list[ollm.ApprovalRequestEvent] = []
    async with ollm.ChatClient(ollm.Registries(), provider=provider, tools=[server]) as client:
        async with client.chat("tidy up") as stream:
            events: list[ollm.ChatEvent] = []
            async for event in stream:
                events.append(event)
                if isinstance(event, ollm.ApprovalRequestEvent):
                    asked.append(event)
                    assert removed == []
                    stream.deny(event.id, "keep it")
        assert_history_valid(client.conversation)
    assert [r.call.name for r in asked] == ["files_remove"]
    assert removed == []
    decisions = [
        (d.call.name, d.decision, d.by) for d in events if isinstance(d, ollm.ToolDecisionEvent)
    ]
    assert decisions == [
        ("files_read", "allow", "tool"),
        ("files_touch", "allow", "default"),
        ("files_remove", "deny", "person"),
    ]
    texts = [e.result for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert texts[1:] == ["the text of /tmp/a", "touched /tmp/a"]


async def test_a_rule_of_the_chat_comes_before_the_servers_annotation(
    anyio_backend: str,
) -> None:
    removed: list[str] = []
    server = ollm_mcp.MCPServer("files", server=files_server(removed))
    provider = ScriptedProvider(calls("remove", "read"), Reply("Done."))
    rules = [ollm.ApprovalRule("allow", "files_remove"), ollm.ApprovalRule("deny", "files_read")]
    async with ollm.ChatClient(
        ollm.Registries(), provider=provider, tools=[server], approval=rules
    ) as client:
        events = await collect(client.chat("tidy up"))
    assert not any(isinstance(e, ollm.ApprovalRequestEvent) for e in events)
    assert removed == ["/tmp/a"]
    results: list[Any] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert results[1].error_code == "TOOL_DENIED"


def decisions_of(events: list[ollm.ChatEvent]) -> list[tuple[str, str, str]]:
    return [
        (e.call.name, e.decision, e.by) for e in events if isinstance(e, ollm.ToolDecisionEvent)
    ]


async def chat_under(
    default: str, *names: str, trust: bool = False, removed: list[str] | None = None
) -> list[ollm.ChatEvent]:
    """A chat calling the files server's ``names`` under a policy of ``default``; a
    question is refused at once (a failure to see, never a wait)."""
    server = ollm_mcp.MCPServer(
        "files", server=files_server([] if removed is None else removed), trust=trust
    )
    provider = ScriptedProvider(calls(*names), Reply("Done."))
    async with ollm.ChatClient(
        ollm.Registries(),
        provider=provider,
        tools=[server],
        approval=ollm.ApprovalPolicy(default=default),  # type: ignore[arg-type]
        approver=lambda request: False,
    ) as client:
        return await collect(client.chat("tidy up"))


async def test_a_servers_hint_never_relaxes_the_policys_default(anyio_backend: str) -> None:
    removed: list[str] = []
    events = await chat_under("deny", "read", "remove", removed=removed)
    assert not any(isinstance(e, ollm.ApprovalRequestEvent) for e in events)
    assert removed == []
    assert decisions_of(events) == [
        ("files_read", "deny", "default"),
        ("files_remove", "deny", "default"),
    ]
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.error_code for r in results] == ["TOOL_DENIED", "TOOL_DENIED"]
    assert "the server's readOnlyHint is not trusted" in results[0].result


async def test_under_ask_by_default_a_read_only_hint_still_asks(anyio_backend: str) -> None:
    events = await chat_under("ask", "read")
    asked = [e for e in events if isinstance(e, ollm.ApprovalRequestEvent)]
    assert [e.call.name for e in asked] == ["files_read"]


async def test_a_trusted_servers_hints_are_its_tools_own_approval(anyio_backend: str) -> None:
    events = await chat_under("deny", "read", "touch", trust=True)
    # readOnlyHint, trusted, runs; the tool without a hint gets the policy's deny.
    assert decisions_of(events) == [
        ("files_read", "allow", "tool"),
        ("files_touch", "deny", "default"),
    ]
    texts = [e.result for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert texts[0] == "the text of /tmp/a"


def test_trust_is_a_key_of_a_servers_configuration() -> None:
    [plain, trusted] = ollm_mcp.load_servers(
        {
            "mcpServers": {
                "a": {"command": "x"},
                "b": {"command": "x", "trust": True},
            }
        }
    )
    assert (plain.trust, trusted.trust) == (False, True)
    with pytest.raises(ollm.ToolsetError, match="trust"):
        ollm_mcp.load_servers({"mcpServers": {"c": {"command": "x", "trust": "yes"}}})
