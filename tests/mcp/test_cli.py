"""``ollm chat --mcp`` and ``ollm tools --mcp``: the installed script, the demo server as a
subprocess, the fake Ollama server; Ctrl-C while a server works or starts."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import OLLM, ollm_env
from mcp_helpers import DEADLOCK, DEMO, STARTUP_TIMEOUTS, gone, pids, stdio_entry

from ollm_testutils import FakeOllamaServer, OllamaReply


@pytest.fixture
def server() -> Iterator[FakeOllamaServer]:
    with FakeOllamaServer() as fake:
        fake.add_model("llava", ["completion", "tools", "vision"])
        yield fake


def run(server: FakeOllamaServer, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [OLLM, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=ollm_env(OLLAMA_HOST=server.url, **env),
    )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_chat_offers_the_tools_a_glob_picks_and_passes_images_to_a_vision_model(
    server: FakeOllamaServer,
    write_servers,
    backend: str,  # type: ignore[no-untyped-def]
) -> None:
    path = write_servers(git=stdio_entry("git"), other=stdio_entry("other"))
    server.script(
        OllamaReply(tool_calls=[("git_add", {"a": 2, "b": 3}), ("git_screenshot", {})]),
        OllamaReply(["It is ", "5."]),
    )
    result = run(
        server, "--backend", backend, "chat", "-m", "llava", "--mcp", str(path), "-t", "git_*", "?"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "It is 5.\n"
    assert "git_add(a=2, b=3)" in result.stderr
    first, second = (r.json for r in server.chat_requests)
    offered = [t["function"]["name"] for t in first["tools"]]
    assert offered[:2] == ["git_add", "git_echo"]
    assert all(name.startswith("git_") for name in offered)
    add, shot = second["messages"][-2:]
    assert (add["tool_name"], add["content"]) == ("git_add", "5")
    assert shot["tool_name"] == "git_screenshot"
    assert len(shot["images"]) == 1


def test_tools_lists_every_servers_tools_with_schemas(  # type: ignore[no-untyped-def]
    server: FakeOllamaServer, write_servers
) -> None:
    path = write_servers(git=stdio_entry("git"))
    text = run(server, "tools", "--mcp", str(path))
    assert text.returncode == 0, text.stderr
    assert "git_add  (from git)\n    Add two whole numbers.\n" in text.stdout
    assert "    - a (integer, required)\n" in text.stdout
    listed = json.loads(run(server, "tools", "--json", "--toolset", f"mcp={path}").stdout)
    add = next(tool for tool in listed if tool["name"] == "git_add")
    assert add["pack"] == "git"
    assert add["parameters"]["required"] == ["a", "b"]
    from_env = run(server, "tools", "--json", OLLM_MCP_CONFIG=str(path))
    assert "git_add" in {tool["name"] for tool in json.loads(from_env.stdout)}


def test_a_server_that_fails_is_one_line_and_the_others_still_list(  # type: ignore[no-untyped-def]
    server: FakeOllamaServer, write_servers
) -> None:
    path = write_servers(good=stdio_entry("good"), bad=stdio_entry("bad", DEMO_MODE="crash"))
    result = run(server, "tools", "--mcp", str(path))
    assert result.returncode == 1
    assert "good_add" in result.stdout
    [line] = result.stderr.splitlines()
    assert line.startswith("error[MCP_SERVER_FAILED]: MCP server 'bad' stopped before it was ready")
    assert "Traceback" not in result.stderr

    server.script(OllamaReply("never"))
    chat = run(server, "chat", "-m", "llama3.2", "--mcp", str(path), "-t", "*_add", "hi")
    assert chat.returncode == 1
    assert "error[MCP_SERVER_FAILED]: MCP server 'bad' stopped before it was ready" in chat.stderr
    assert "Traceback" not in chat.stderr
    assert not server.chat_requests


def test_a_bad_configuration_says_what_to_fix(server: FakeOllamaServer, tmp_path: Path) -> None:
    missing = run(server, "chat", "-m", "llama3.2", "--mcp", str(tmp_path / "no.json"), "hi")
    assert missing.returncode == 1
    assert missing.stderr == (
        f"error[MCP_CONFIG_INVALID]: Cannot use MCP servers file {str(tmp_path / 'no.json')!r}: "
        "it does not exist. Fix the path given to --mcp or OLLM_MCP_CONFIG.\n"
    )
    kind = run(server, "tools", "--toolset", "nope=x")
    assert kind.returncode == 1
    assert "Toolset kind 'nope' is not installed. Installed kinds: mcp." in kind.stderr
    shape = run(server, "tools", "--toolset", "mcp")
    assert shape.returncode == 1
    assert "--toolset 'mcp' is not KIND=CONFIG" in shape.stderr


def test_no_tool_picked_gets_a_hint(  # type: ignore[no-untyped-def]
    server: FakeOllamaServer, write_servers
) -> None:
    server.script(OllamaReply("Hi."))
    path = write_servers(git=stdio_entry("git"))
    result = run(server, "chat", "-m", "llama3.2", "--mcp", str(path), "hello")
    assert result.returncode == 0
    assert "pick the toolsets' tools with -t 'git_*'" in result.stderr
    assert "tools" not in server.chat_requests[0].json


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and FIFOs")
@pytest.mark.parametrize("moment", ["tool call", "start"])
def test_ctrl_c_stops_the_chat_cancels_the_call_and_reaps_the_server(  # type: ignore[no-untyped-def]
    server: FakeOllamaServer, write_servers, tmp_path: Path, moment: str
) -> None:
    record, started = tmp_path / "record", tmp_path / "started"
    os.mkfifo(started)
    mode = "hang" if moment == "start" else "normal"
    entry = stdio_entry("demo", DEMO_MODE=mode, DEMO_RECORD=str(record), DEMO_STARTED=str(started))
    entry["startup_timeout_sec"] = 600
    path = write_servers(demo=entry)
    server.script(OllamaReply(tool_calls=[("demo_slow", {})]), OllamaReply("never"))
    process = subprocess.Popen(
        [OLLM, "chat", "-m", "llama3.2", "--mcp", str(path), "-t", "demo_*", "wait"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ollm_env(OLLAMA_HOST=server.url),
    )
    try:
        assert _wait_for_fifo(started), "the server never got that far"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=DEADLOCK)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert "Traceback" not in err
    [pid] = pids(record)
    assert gone(pid)
    if moment == "tool call":
        # MCP's notifications/cancelled reached the server, which cancelled the call.
        assert "cancelled slow" in record.read_text().splitlines()


def _wait_for_fifo(path: Path) -> bool:
    """Block until the server writes to the FIFO (bounded by DEADLOCK)."""
    seen: list[str] = []

    def read() -> None:
        with open(path, encoding="utf-8") as fifo:
            seen.append(fifo.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(DEADLOCK)
    return bool(seen)


BANNER = "demo server starting"


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell")
@pytest.mark.parametrize("debug", [False, True])
def test_a_banner_before_mcp_is_one_warning_and_the_details_only_with_debug(  # type: ignore[no-untyped-def]
    server: FakeOllamaServer, write_servers, debug: bool
) -> None:
    """The common ``echo starting; exec server``: the server works, and its banner is
    quoted in one line (it was a ten-line pydantic traceback in every chat)."""
    script = f"echo '{BANNER}'; exec {shlex.join([sys.executable, DEMO])}"
    path = write_servers(demo={"command": "sh", "args": ["-c", script]})
    server.script(OllamaReply(tool_calls=[("demo_add", {"a": 2, "b": 3})]), OllamaReply("Five."))
    flags = ["--debug"] if debug else []
    result = run(server, *flags, "chat", "-m", "llama3.2", "--mcp", str(path), "-t", "demo_*", "?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Five.\n"
    assert server.chat_requests[1].json["messages"][-1]["content"] == "5"
    warning = (
        f"MCP server 'demo' wrote a line that is not MCP to its standard output: '{BANNER}'. "
        "It was ignored; a server should write only MCP there, and its own messages to stderr."
    )
    if debug:
        assert warning in result.stderr
        assert "Failed to parse JSONRPC message from server" in result.stderr
        assert "Traceback" in result.stderr
    else:
        assert [line for line in result.stderr.splitlines() if "demo server" in line] == [
            f"warning: {warning}"
        ]
        assert "Traceback" not in result.stderr
        assert "JSONRPC" not in result.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell")
def test_a_server_that_writes_only_garbage_is_one_line_quoting_it(  # type: ignore[no-untyped-def]
    server: FakeOllamaServer, write_servers
) -> None:
    """Whether it exits or goes on answering garbage until its start-up time is up."""
    exits = {"command": "sh", "args": ["-c", "echo garbage; echo more; exit 1"]}
    result = run(server, "tools", "--mcp", str(write_servers(junk=exits)))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error[MCP_SERVER_FAILED]: MCP server 'junk' stopped before it was ready "
        "(sh -c 'echo garbage; echo more; exit 1'). It wrote a line that is not MCP to its "
        "standard output: 'garbage'. Run the command by hand to see why."
    ]
    for timeout in STARTUP_TIMEOUTS:
        # It must have read ollm's first request and answered it before its time is up.
        answers = {
            "command": "sh",
            "args": ["-c", "while read -r line; do echo garbage; done"],
            "startup_timeout_sec": timeout,
        }
        result = run(server, "tools", "--mcp", str(write_servers(junk=answers)))
        assert result.returncode == 1
        [line] = result.stderr.splitlines()
        assert line.startswith(
            f"error[MCP_SERVER_TIMEOUT]: MCP server 'junk' did not answer within {timeout:g} "
        )
        if "garbage" in line:
            break
    assert line.endswith(
        "It wrote a line that is not MCP to its standard output: 'garbage'. Check that it "
        "speaks MCP, or give it more time with startup_timeout_sec."
    )


def test_an_answer_nested_too_deep_to_read_fails_the_call_at_once(  # type: ignore[no-untyped-def]
    server: FakeOllamaServer, write_servers
) -> None:
    """The call's result says what was wrong, and the chat goes on: no traceback, no wait
    for the call's timeout (an hour here)."""
    entry = stdio_entry("demo")
    entry["tool_timeout_sec"] = 3600
    path = write_servers(demo=entry)
    server.script(
        OllamaReply(tool_calls=[("demo_nested", {"levels": 250})]), OllamaReply("Too deep.")
    )
    result = run(server, "chat", "-m", "llama3.2", "--mcp", str(path), "-t", "demo_*", "?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Too deep.\n"
    assert "Traceback" not in result.stderr
    assert "JSONRPC" not in result.stderr
    answer = server.chat_requests[1].json["messages"][-1]
    assert answer["content"].startswith(
        "Tool 'demo_nested' failed: MCP server 'demo' answered the call, but its answer nests "
        "deeper than about 200 levels"
    )
