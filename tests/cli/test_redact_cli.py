"""``ollm chat --middleware redact`` against a careful model: a key cut between pieces of
minified JSON, streamed tool-call arguments, partial typed output and the system prompt
never reach the screen, ``--json`` or the log; ``--middleware audit`` writes no key and
refuses an audit file others may read."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from cli_helpers import OLLM, ollm_env

from ollm_testutils import (
    FakeOllamaServer,
    FakeOpenAIServer,
    OllamaReply,
    OpenAIReply,
    OpenAIToolCall,
)

RunOllm = Callable[..., subprocess.CompletedProcess[str]]

KEY = "sk-proj-" + "Q7wE9rT1yU3iO5pA2sD4fG6h"


def pieces_of(secret: str) -> list[str]:
    """Every 8 characters of ``secret``: none may show anywhere."""
    return [secret[i : i + 8] for i in range(len(secret) - 7)]


def leaks(text: str, secret: str = KEY) -> list[str]:
    return [piece for piece in pieces_of(secret) if piece in text]


def test_a_key_cut_in_minified_json_past_512_characters_never_shows(
    run_ollm: RunOllm, server: FakeOllamaServer
) -> None:
    """Item 7: no whitespace for 600 characters, then a key cut in two pieces."""
    head = '{"config":{"padding":"' + "x" * 600 + '","key":"' + KEY[:14]
    tail = KEY[14:] + '"}}'
    server.script(OllamaReply([head, tail]), OllamaReply([head, tail]))
    done = run_ollm("chat", "-m", "llama3.2", "--middleware", "redact", "config?", OLLM_LOGS="off")
    assert done.returncode == 0, done.stderr
    assert leaks(done.stdout + done.stderr) == []
    assert '"key":"[REDACTED]"}}' in done.stdout
    as_json = run_ollm(
        "chat", "-m", "llama3.2", "--middleware", "redact", "--json", "config?", OLLM_LOGS="off"
    )
    assert as_json.returncode == 0, as_json.stderr
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    joined = "".join(e["text"] for e in events if e["type"] == "text")
    assert leaks(joined) == []
    assert joined == head[: head.index(KEY[:3])] + '[REDACTED]"}}'


def test_streamed_call_arguments_never_show_the_key(tmp_path: Path) -> None:
    """Item 8: ``--call-deltas`` shows the arguments as the model writes them."""
    with FakeOpenAIServer() as server:
        call = OpenAIToolCall("current_time", {"timezone": KEY}, id="call_a")
        server.script(OpenAIReply(tool_calls=[call], tool_call_framing="split"), OpenAIReply("Ok."))
        done = subprocess.run(
            [
                OLLM,
                "chat",
                "-p",
                "openai",
                "-m",
                "gpt-test",
                "-t",
                "current_time",
                "--call-deltas",
                "--json",
                "--middleware",
                "redact",
                "time?",
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            env=ollm_env(OPENAI_BASE_URL=server.base_url, OLLM_LOGS="off"),
        )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    written = "".join(
        e.get("arguments_delta", "") for e in events if e["type"] == "tool_call_delta"
    )
    assert written  # the pieces were shown
    assert leaks(done.stdout + done.stderr) == []
    assert json.loads(written) == {"timezone": "[REDACTED]"}


def test_partial_output_never_shows_part_of_the_key(
    run_ollm: RunOllm, server: FakeOllamaServer
) -> None:
    """Item 8: ``--schema --json`` streams ``partial_output`` events."""
    answer = json.dumps({"name": "Rex", "note": f"the key is {KEY} ok"})
    cuts = range(0, len(answer), 3)
    server.script(OllamaReply([answer[i : i + 3] for i in cuts]))
    done = run_ollm(
        "chat", "-m", "llama3.2", "--middleware", "redact", "--schema", "name, note",
        "--json", "invent a dog", OLLM_LOGS="off",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    partial = [e for e in events if e["type"] == "partial_output"]
    assert len(partial) > 3
    assert leaks(done.stdout + done.stderr) == []
    [output] = [e["value"] for e in events if e["type"] == "output"]
    assert output == {"name": "Rex", "note": "the key is [REDACTED] ok"}


def test_a_key_in_the_system_prompt_stays_out_of_the_log(
    run_ollm: RunOllm, server: FakeOllamaServer, tmp_path: Path
) -> None:
    """Item 9: ``-s`` with a key; the log keeps the prompt redacted, and so does the
    request the model gets."""
    logs = tmp_path / "logs.db"
    server.script(OllamaReply("Noted."))
    done = run_ollm(
        "chat", "-m", "llama3.2", "--middleware", "redact", "-s", f"Use the key {KEY}.",
        "hi", OLLM_LOGS_PATH=str(logs),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for file in tmp_path.glob("logs.db*"):
        assert leaks(file.read_bytes().decode("latin-1")) == [], file
    [conversation] = json.loads(run_ollm("logs", "--json", OLLM_LOGS_PATH=str(logs)).stdout)
    shown = run_ollm("logs", "show", conversation["id"], "--json", OLLM_LOGS_PATH=str(logs))
    assert "Use the key [REDACTED]." in shown.stdout
    assert leaks(json.dumps(server.chat_requests[0].json)) == []


def test_audit_writes_no_key_and_refuses_a_file_others_may_read(
    run_ollm: RunOllm, server: FakeOllamaServer, tmp_path: Path
) -> None:
    """Item 10: keys redacted in the lines; a 0644 audit file is refused, unchanged."""
    audit = tmp_path / "audit.jsonl"
    server.script(OllamaReply("Noted."))
    done = run_ollm(
        "chat", "-m", "llama3.2", "--middleware", "audit", f"my key is {KEY}",
        OLLM_AUDIT_PATH=str(audit), OLLM_LOGS="off",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert leaks(audit.read_text()) == []
    assert "my key is [REDACTED]" in audit.read_text()
    assert oct(os.stat(audit).st_mode & 0o777) == oct(0o600)

    wide = tmp_path / "wide.jsonl"
    wide.write_text("")
    wide.chmod(0o644)
    refused = run_ollm(
        "chat", "-m", "llama3.2", "--middleware", "audit", "hello",
        OLLM_AUDIT_PATH=str(wide), OLLM_LOGS="off",
    )  # fmt: skip
    assert refused.returncode == 1
    assert "error[MIDDLEWARE_FAILED]" in refused.stderr
    assert f"the audit file {wide} is 0644" in refused.stderr
    assert f"chmod 600 {wide}" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert wide.read_text() == ""  # nothing written
    assert len(server.chat_requests) == 1  # and nothing sent: refused before the request
