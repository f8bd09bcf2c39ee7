"""A lone surrogate in a model's tool arguments never ends a chat: the terminal, ``--json``,
the log and the request sent back to the provider write it as U+FFFD."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import OLLM, ollm_env
from log_helpers import latest, ollm

from ollm_testutils import FakeGeminiServer, GeminiReply

# Legal JSON text whose string holds a lone surrogate once decoded (Python's json does;
# the <tool_call> recovery decodes with it), as a model may write it.
CALL = '<tool_call>{"name": "calculate", "arguments": {"expression": "\\ud800 + 1"}}</tool_call>'
REPLACED = "\ufffd + 1"


@pytest.mark.parametrize("json_output", [False, True])
def test_a_lone_surrogate_in_tool_arguments_never_ends_the_chat(
    tmp_path: Path, json_output: bool
) -> None:
    db = tmp_path / "logs.db"
    flags = ["--json"] if json_output else []
    done = ollm(db, "chat", "-p", "echo", "-t", "calculate", *flags, CALL)
    assert done.returncode == 0, done.stderr
    assert "unexpected" not in done.stderr
    if json_output:
        events = [json.loads(line) for line in done.stdout.splitlines()]
        [start] = [e for e in events if e["type"] == "tool_call_start"]
        assert start["call"]["args"] == {"expression": REPLACED}
        assert events[-1] == {"type": "finish", "reason": "stop", "usage": events[-1]["usage"]}
    else:
        assert f'calculate(expression="{REPLACED}")' in done.stderr
        assert done.stdout.startswith("calculate -> ")
    messages = latest(db)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["args"] == {"expression": REPLACED}


def test_the_request_sent_back_to_the_provider_carries_a_replacement_character(
    tmp_path: Path,
) -> None:
    db = tmp_path / "logs.db"
    with FakeGeminiServer(api_key="test-key") as server:
        server.script(GeminiReply(CALL), GeminiReply("It is not a number."))
        done = ollm(
            db,
            *("chat", "-p", "gemini", "-m", "gemini-2.5-flash", "-t", "calculate", "Compute."),
            OLLM_GEMINI_BASE_URL=server.url,
            GEMINI_API_KEY="test-key",
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "It is not a number."
        second = server.generate_requests[1].json
    calls = [
        (part["functionCall"]["name"], part["functionCall"]["args"])
        for content in second["contents"]
        for part in content["parts"]
        if "functionCall" in part
    ]
    assert calls == [("calculate", {"expression": REPLACED})]
    assert len(latest(db)["messages"]) == 4


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX arguments are bytes")
def test_text_the_terminal_cannot_encode_is_printed_replaced(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    # An argument that is not UTF-8 reaches Python as a lone surrogate (surrogateescape).
    done = subprocess.run(
        [OLLM.encode(), b"chat", b"-p", b"echo", b"caf\xe9 ok"],
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=ollm_env(OLLM_LOGS_PATH=str(db), PYTHONIOENCODING="utf-8:strict"),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "caf\ufffd ok\n".encode()
    assert latest(db)["messages"][0]["parts"][0]["text"] == "caf\ufffd ok"
    # A terminal that speaks ASCII gets "?" for what it cannot show, never a traceback.
    ascii_only = ollm(db, "chat", "-p", "echo", "café ☕", PYTHONIOENCODING="ascii")
    assert ascii_only.returncode == 0, ascii_only.stderr
    assert ascii_only.stdout == "caf? ?\n"
