"""``ollm chat -p openai`` (a subprocess) against llama-cpp-python's real server."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import OLLM, ollm_env
from llama_server import MODEL, LlamaServer

from .conftest import MAX_TOKENS
from .test_python_api import OVER, PROMPT, sdk_chunks

pytestmark = pytest.mark.realserver

GREEDY = ["--temperature", "0", "--max-tokens", str(MAX_TOKENS), "--seed", "1"]
# Only prevents a hang: the server's log says it saw the client go within a second.
LOG_LIMIT = 120.0
COUNT = "Count from 1 to 500: 1, 2, 3,"


def ollm_chat(
    server: LlamaServer, *args: str, profiles: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = ollm_env(OPENAI_BASE_URL=server.base_url)
    if profiles is not None:
        env["OLLM_OPENAI_PROFILES"] = str(profiles)
    return subprocess.run(
        [OLLM, "chat", "-m", MODEL, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def whole_replies(server: LlamaServer, folder: Path) -> Path:
    """A profiles file whose profile ``whole`` asks ``server`` for whole replies."""
    path = folder / "openai.toml"
    path.write_text(f'[whole]\nbase_url = "{server.base_url}"\nstream = false\n')
    return path


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_streamed_text_is_the_openai_sdks(llama_server: LlamaServer) -> None:
    result = ollm_chat(llama_server, "-p", "openai", *GREEDY, PROMPT)
    theirs = sdk_chunks(llama_server, PROMPT, temperature=0.0, max_tokens=MAX_TOKENS, seed=1)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "".join(theirs).strip()


def test_continue_sends_the_conversation_again(llama_server: LlamaServer, tmp_path: Path) -> None:
    profiles = whole_replies(llama_server, tmp_path)
    logs = {"OLLM_LOGS_PATH": str(tmp_path / "logs.db")}
    first = subprocess.run(
        [OLLM, "chat", "-p", "openai:whole", "-m", MODEL, *GREEDY, "--json", "My name is Ada."],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        env=ollm_env(OLLM_OPENAI_PROFILES=str(profiles), **logs),
    )
    second = subprocess.run(
        [OLLM, "chat", "-p", "openai:whole", "-m", MODEL, *GREEDY, "--json", "-c", "My name?"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        env=ollm_env(OLLM_OPENAI_PROFILES=str(profiles), **logs),
    )
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    (before,) = [e["usage"] for e in events(first.stdout) if e["type"] == "finish"]
    (after,) = [e["usage"] for e in events(second.stdout) if e["type"] == "finish"]
    # The second request carried the first exchange: the server counted it.
    assert after["prompt_tokens"] > before["prompt_tokens"] + before["completion_tokens"]


def test_a_streamed_prompt_over_the_window_names_its_size(llama_server: LlamaServer) -> None:
    result = ollm_chat(llama_server, "-p", "openai", *GREEDY, OVER)
    assert result.returncode != 0
    assert "STREAM_INTERRUPTED" in result.stderr or "closed the stream" in result.stderr
    assert "the prompt was about" in result.stderr, result.stderr
    assert "closed early" not in result.stderr


def test_a_prompt_over_the_window_not_streamed_is_context_exceeded(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    profiles = whole_replies(llama_server, tmp_path)
    result = ollm_chat(llama_server, "-p", "openai:whole", *GREEDY, OVER, profiles=profiles)
    assert result.returncode != 0
    assert "CONTEXT_EXCEEDED" in result.stderr, result.stderr
    assert "TOKEN_LIMIT" not in result.stderr
    assert "not sent again" in result.stderr


def test_ctrl_c_stops_the_servers_generation(llama_server: LlamaServer) -> None:
    before = llama_server.output().count("disconnected")
    process = subprocess.Popen(
        [OLLM, "chat", "-p", "openai", "-m", MODEL, "--max-tokens", "900", COUNT],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ollm_env(OPENAI_BASE_URL=llama_server.base_url),
    )
    try:
        assert process.stdout is not None
        first = process.stdout.read(1)  # the reply has begun
        assert first, process.stderr.read() if process.stderr else ""
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # The server saw the client go and stopped generating (its log says so).
    deadline = time.monotonic() + LOG_LIMIT
    while llama_server.output().count("disconnected") == before:
        assert time.monotonic() < deadline, llama_server.output()[-2000:]
        time.sleep(0.1)
    # It is free for the next request (it serves one at a time).
    result = ollm_chat(llama_server, "-p", "openai", *GREEDY, "Say yes.")
    assert result.returncode == 0, result.stderr


def test_schema_falls_back_to_json_object(llama_server: LlamaServer) -> None:
    # The server refuses json_schema (HTTP 500) and constrains json_object with a grammar,
    # slow over this model's 262,144 tokens: a few tokens, no correction, show the ladder.
    schema = '{"type": "object", "properties": {"colour": {"type": "string"}}}'
    result = ollm_chat(
        llama_server,
        "-p",
        "openai",
        "--max-tokens",
        "4",
        "--output-retries",
        "0",
        "--schema",
        schema,
        "What colour is the sky? Answer in JSON.",
    )
    assert "json_object" in result.stderr, result.stderr
    assert "PROVIDER_ERROR" not in result.stderr
    assert "HTTP 500" not in result.stderr
