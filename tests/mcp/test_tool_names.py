"""A toolset's tool whose name is taken (an installed tool's, or an earlier toolset's)
keeps its tool under ``NAME_2``, said in a notice; ``ollm tools`` lists each tool once,
with its source, under the name a chat offers it by."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from types import ModuleType

import pytest
from cli_helpers import OLLM, ollm_env
from mcp.server.mcpserver import MCPServer
from mcp_helpers import stdio_entry
from runtime_helpers import collect

import ollm
import ollm_mcp
from ollm_testutils import FakeOllamaServer, OllamaReply
from ollm_testutils.mock import Reply, ScriptedProvider


def current_time() -> str:
    """The time, as the application tells it."""
    return "the application's time"


@pytest.mark.anyio
async def test_an_installed_tool_keeps_its_name_and_the_servers_is_renamed(
    anyio_backend: str, demo: ModuleType
) -> None:
    registries = ollm.Registries()
    registries.tools.register(current_time, pack="ollm")
    server = ollm_mcp.MCPServer("current", server=demo.build("current", clock=True))
    provider = ScriptedProvider(
        Reply(tool_calls=[("current_time", {}), ("current_time_2", {})]), Reply("Done.")
    )
    async with ollm.ChatClient(
        registries, provider=provider, tools=["current_*"], toolsets=[server]
    ) as client:
        events = await collect(client.chat("what time is it?"))
    offered = [tool.name for tool in provider.requests[0].tools]
    assert offered.count("current_time") == 1
    assert "current_time_2" in offered
    [notice] = [e for e in events if isinstance(e, ollm.NoticeEvent) and e.kind == "tool_name"]
    assert "toolset 'current' has a tool named 'current_time'" in notice.message
    assert "offered as 'current_time_2'" in notice.message
    results = [e.result for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert results == ["the application's time", "the server's time"]


@pytest.mark.anyio
async def test_of_two_toolsets_the_first_keeps_a_shared_name(
    anyio_backend: str, demo: ModuleType
) -> None:
    # "a" with a tool "b_echo" and "a_b" with "echo": both give "a_b_echo".
    first = ollm_mcp.MCPServer("a", server=_echo_server("a", "b_echo"))
    second = ollm_mcp.MCPServer("a_b", server=_echo_server("a_b", "echo"))
    provider = ScriptedProvider(Reply("Hi."))
    async with ollm.ChatClient(
        ollm.Registries(), provider=provider, tools=["a_*"], toolsets=[first, second]
    ) as client:
        events = await collect(client.chat("hi"))
    offered = [tool.name for tool in provider.requests[0].tools]
    assert offered.count("a_b_echo") == 1
    assert "a_b_echo_2" in offered
    notices = [e.message for e in events if isinstance(e, ollm.NoticeEvent)]
    assert any("toolset 'a_b' has a tool named 'a_b_echo'" in n for n in notices)


def _echo_server(name: str, tool: str) -> MCPServer:
    server = MCPServer(name)

    @server.tool(name=tool)
    def echo(text: str) -> str:
        """Say the text back."""
        return f"{name}: {text}"

    return server


@pytest.fixture
def ollama() -> Iterator[FakeOllamaServer]:
    with FakeOllamaServer() as fake:
        yield fake


def test_ollm_tools_lists_each_tool_once_and_a_chat_offers_the_same_names(  # type: ignore[no-untyped-def]
    ollama: FakeOllamaServer, write_servers
) -> None:
    path = write_servers(current=stdio_entry("current", DEMO_CLOCK="1"))
    env = ollm_env(OLLAMA_HOST=ollama.url)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [OLLM, *args], capture_output=True, text=True, timeout=120, env=env, check=False
        )

    listed = run("tools", "--mcp", str(path), "--json")
    assert listed.returncode == 0, listed.stderr
    names = [(tool["name"], tool["pack"]) for tool in json.loads(listed.stdout)]
    assert [n for n, _ in names].count("current_time") == 1
    assert ("current_time_2", "current") in names
    assert dict(names)["current_time"] != "current"  # the built-in kept its name
    assert "offered as 'current_time_2'" in listed.stderr
    text = run("tools", "--mcp", str(path))
    assert "current_time_2  (from current)" in text.stdout
    assert (
        text.stdout.count("\ncurrent_time  (from") + text.stdout.startswith("current_time  (from")
        == 1
    )
    ollama.script(
        OllamaReply(tool_calls=[("current_time_2", {})]), OllamaReply("It is the server's.")
    )
    chat = run("chat", "-m", "llama3.2", "--mcp", str(path), "-t", "current_*", "time?")
    assert chat.returncode == 0, chat.stderr
    offered = [t["function"]["name"] for t in ollama.chat_requests[0].json["tools"]]
    assert offered.count("current_time") == 1
    assert "current_time_2" in offered
    assert "offered as 'current_time_2'" in chat.stderr
    told = ollama.chat_requests[1].json["messages"][-1]
    assert (told["tool_name"], told["content"]) == ("current_time_2", "the server's time")
