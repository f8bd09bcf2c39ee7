"""The mcpServers configuration: the shapes other clients write, and what is wrong in it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ollm
import ollm_mcp


def test_stdio_and_http_entries_in_the_shape_other_clients_use(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "git": {
                        "command": "uvx",
                        "args": ["mcp-server-git", "--repository", "."],
                        "env": {"GIT_PAGER": "cat"},
                        "cwd": "repo",
                        "autoApprove": ["git_status"],  # another client's key: ignored
                    },
                    "remote": {
                        "type": "http",
                        "url": "https://user:secret@example.com/mcp?key=k",
                        "headers": {"Authorization": "Bearer t"},
                        "tool_timeout_sec": 5,
                    },
                    "off": {"command": "nothing", "disabled": True},
                }
            }
        )
    )
    git, remote = ollm_mcp.load_servers(path)
    assert (git.name, git.transport, git.command) == ("git", "stdio", "uvx")
    assert git.args == ("mcp-server-git", "--repository", ".")
    assert git.env == {"GIT_PAGER": "cat"}
    assert git.cwd == str((tmp_path / "repo").resolve())
    assert git.startup_timeout == ollm_mcp.DEFAULT_STARTUP_TIMEOUT
    assert (remote.transport, remote.headers, remote.tool_timeout) == (
        "http",
        {"Authorization": "Bearer t"},
        5,
    )
    # Messages never show the password, the query or the headers.
    assert remote.describe() == "https://example.com/mcp"
    assert isinstance(git, ollm.Toolset)


def test_json_text_a_dict_and_the_servers_key_of_vs_code() -> None:
    [one] = ollm_mcp.load_servers('{"servers": {"a": {"url": "http://127.0.0.1:1/mcp"}}}')
    [two] = ollm_mcp.load_servers({"mcpServers": {"b": {"command": "b-server"}}})
    assert (one.name, two.name) == ("a", "b")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "it is not valid JSON"),
        ("[]", "it holds a list, not a JSON object"),
        ('{"other": {}}', "it has no 'mcpServers' object"),
        ('{"mcpServers": []}', "'mcpServers' is a list, not an object of servers"),
        ('{"mcpServers": {"a": "uvx"}}', "server 'a' is a string, not an object"),
        ('{"mcpServers": {"a": {}}}', "server 'a' needs 'command' (a program to start) or 'url'"),
        (
            '{"mcpServers": {"a": {"command": "x", "url": "http://h/mcp"}}}',
            "server 'a' has both 'command' and 'url'",
        ),
        (
            '{"mcpServers": {"a": {"command": "x", "args": "--flag"}}}',
            "server 'a': Expected `array`, got `str` - at `$.args`",
        ),
        (
            '{"mcpServers": {"a": {"url": "http://h/sse", "type": "sse"}}}',
            "uses the older SSE transport",
        ),
        ('{"mcpServers": {"a b": {"command": "x"}}}', "the server name 'a b' cannot prefix"),
        (
            '{"mcpServers": {"a": {"command": "x", "startup_timeout_sec": 0}}}',
            "server 'a': timeouts must be positive",
        ),
    ],
)
def test_what_is_wrong_is_named_with_its_code(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "servers.json"
    path.write_text(content)
    with pytest.raises(ollm.ToolsetError) as caught:
        ollm_mcp.load_servers(path)
    assert caught.value.code == ollm_mcp.MCPErrorCode.CONFIG_INVALID == "MCP_CONFIG_INVALID"
    assert caught.value.message.startswith(f"Cannot use MCP servers file {str(path)!r}: ")
    assert problem in caught.value.message


def test_a_missing_file_says_which_and_where_it_was_asked_for(tmp_path: Path) -> None:
    with pytest.raises(ollm.ToolsetError, match=r"does not exist\. Fix the path given to --mcp"):
        ollm_mcp.load_servers(tmp_path / "nope.json")


def test_a_server_needs_exactly_one_way_to_reach_it() -> None:
    with pytest.raises(ValueError, match="exactly one of command=, url= or server="):
        ollm_mcp.MCPServer("x")
    with pytest.raises(ValueError, match=r"\(got command, url\)"):
        ollm_mcp.MCPServer("x", command="a", url="http://h/mcp")
    with pytest.raises(TypeError, match="args must be a list"):
        ollm_mcp.MCPServer("x", command="a", args="--flag")
