"""``ollm chat --middleware NAME``: a middleware that fails ends that chat with one
``error[MIDDLEWARE_FAILED]`` line and exit 1, never a traceback, and the next chat works."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import ollm_env
from cli_session import InteractiveOllm

from ollm_testutils import FakeOllamaServer, OllamaReply

RunOllm = Callable[..., subprocess.CompletedProcess[str]]

FAILS_ONCE = '''
import ollm


class FailsOnce:
    """Raises the first time a request goes out, then lets everything through."""

    def __init__(self):
        self.failed = False

    def on_request(self, ctx, request):
        if not self.failed:
            self.failed = True
            raise ValueError("cannot reach the audit server")
        return request


@ollm.hookimpl
def ollm_middleware():
    return [ollm.MiddlewareSpec("flaky", FailsOnce, "fails once")]
'''


def test_a_failing_middleware_is_one_error_line_and_exit_1(
    run_ollm: RunOllm, plugin_path: Callable[[str, str], str]
) -> None:
    path = plugin_path("flaky", FAILS_ONCE)
    done = run_ollm("chat", "-m", "llama3.2", "--middleware", "flaky", "hi", PYTHONPATH=path)
    assert done.returncode == 1
    assert done.stderr.count("error[MIDDLEWARE_FAILED]") == 1
    assert (
        "error[MIDDLEWARE_FAILED]: Middleware 'flaky' failed in on_request: ValueError: cannot "
        "reach the audit server. The chat was stopped; its history is intact."
    ) in done.stderr
    assert "Traceback" not in done.stderr
    as_json = run_ollm(
        "chat", "-m", "llama3.2", "--middleware", "flaky", "--json", "hi", PYTHONPATH=path
    )
    assert as_json.returncode == 1
    assert as_json.stdout.count('"code":"MIDDLEWARE_FAILED"') == 1
    assert as_json.stdout.splitlines()[-1].startswith('{"type":"finish","reason":"error"')


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_after_a_failed_chat_the_session_goes_on(
    server: FakeOllamaServer, plugin_path: Callable[[str, str], str]
) -> None:
    server.script(OllamaReply("Here I am."))
    env = ollm_env(OLLAMA_HOST=server.url, PYTHONPATH=plugin_path("flaky", FAILS_ONCE))
    with InteractiveOllm(["chat", "-m", "llama3.2", "--middleware", "flaky"], env) as session:
        session.out.wait_for("> ")
        session.send("first")
        session.err.wait_for("error[MIDDLEWARE_FAILED]")
        session.out.wait_for("> ", count=2)
        session.send("second")
        session.out.wait_for("Here I am.")
        session.out.wait_for("> ", count=3)
        assert session.exit() == 0, session.err.text
    assert "Traceback" not in session.err.text
    # The failed chat sent nothing (and its prompt, never answered, is not sent again).
    assert [m["content"] for m in server.chat_requests[0].json["messages"]] == ["second"]


KEY = "sk-proj-abcdefghijklmnop1234567890"


def test_redact_keeps_a_key_off_the_screen_and_out_of_the_log(
    run_ollm: RunOllm, server: FakeOllamaServer, tmp_path: Path
) -> None:
    logs = str(tmp_path / "logs.db")
    server.script(
        OllamaReply(["Your key, sk-proj-", "abcdefghijklmnop", "1234567890", " is noted."])
    )
    done = run_ollm(
        "chat", "-m", "llama3.2", "--middleware", "redact", f"remember {KEY}", OLLM_LOGS_PATH=logs
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Your key, [REDACTED] is noted.\n"
    assert "sk-proj" not in done.stderr
    listed = run_ollm("logs", "--json", OLLM_LOGS_PATH=logs)
    cid = json.loads(listed.stdout)[0]["id"]
    shown = run_ollm("logs", "show", cid, "--json", OLLM_LOGS_PATH=logs)
    assert shown.returncode == 0, shown.stderr
    assert "sk-proj" not in shown.stdout
    assert "[REDACTED]" in shown.stdout
    for file in tmp_path.glob("logs.db*"):  # the database, its write-ahead log...
        assert b"sk-proj" not in file.read_bytes(), file
    # What the model was sent came from the history: redacted too.
    assert KEY not in json.dumps(server.chat_requests[0].json)


def test_redact_and_audit_are_listed_and_audit_writes_its_file(
    run_ollm: RunOllm, server: FakeOllamaServer, tmp_path: Path
) -> None:
    plugins = run_ollm("plugins")
    assert "middleware: redact, audit" in plugins.stdout
    audit = tmp_path / "audit.jsonl"
    done = run_ollm(
        "chat", "-m", "llama3.2", "--middleware", "audit", "hello", OLLM_AUDIT_PATH=str(audit)
    )
    assert done.returncode == 0, done.stderr
    [line] = [json.loads(x) for x in audit.read_text().splitlines()]
    assert (line["kind"], line["model"], line["last"]["text"]) == ("request", "llama3.2", "hello")
