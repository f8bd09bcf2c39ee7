"""A tool of an MCP server is marked as one on its span; a tool of the application is not."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from otel_helpers import Telemetry

import ollm
import ollm_mcp
from ollm_testutils import Reply, ScriptedProvider

DEMO = Path(__file__).resolve().parent.parent / "mcp" / "servers" / "demo_server.py"


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: A number.
        b: Another.
    """
    return a + b


@pytest.mark.anyio
async def test_an_mcp_tool_call_is_marked_as_one(telemetry: Telemetry) -> None:
    spec = importlib.util.spec_from_file_location("ollm_otel_demo_server", DEMO)
    assert spec is not None
    assert spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    server = ollm_mcp.MCPServer("demo", server=demo.build())
    provider = ScriptedProvider(
        Reply(tool_calls=[("demo_add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]),
        Reply("3 and 7."),
    )
    client = ollm.ChatClient(
        ollm.Registries(),
        provider=provider,
        model="m",
        tools=[server, add],
        middleware=[telemetry.otel()],
    )
    async with client:
        result = await client.run("Add them")
    assert result.ok, result
    spans = {
        s.attributes["gen_ai.tool.name"]: s.attributes for s in telemetry.named("execute_tool")
    }
    assert spans["demo_add"]["gen_ai.tool.type"] == "extension"
    assert spans["demo_add"]["mcp.method.name"] == "tools/call"
    assert spans["add"]["gen_ai.tool.type"] == "function"
    assert "mcp.method.name" not in spans["add"]
