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


# What only a chat with middleware, approval rules or a tool that asks may import.
MACHINERY = (
    "ollm.runtime.middleware",
    "ollm.runtime.approval",
    "ollm.runtime.tool_phase",
    "ollm.tools.approval",
    "ollm.cli.approval",
    "ollm.middleware.redact",
    "ollm.middleware.audit",
)

LOADED_BY_THE_CLI = f"""
import contextlib, io, json, sys
from ollm.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps([code, [m for m in {MACHINERY!r} if m in sys.modules]]))
"""


def loaded_by(*args: str, **env: str) -> list[object]:
    """What ``ollm chat ARGS`` exits with, and which of ``MACHINERY`` it imported."""
    done = subprocess.run(
        [sys.executable, "-c", LOADED_BY_THE_CLI, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=ollm_env(**env),
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_a_chat_that_names_no_middleware_imports_none_of_it(
    server: FakeOllamaServer, tmp_path: Path
) -> None:
    env = {"OLLAMA_HOST": server.url, "HOME": str(tmp_path)}
    server.script(OllamaReply("Hello."))
    assert loaded_by("chat", "-m", "llama3.2", "hi", **env) == [0, []]
    # Offered a tool, with no rules: the rules are read (there are none), no more.
    call = OllamaReply(tool_calls=[("calculate", {"expression": "1 + 1"})])
    server.script(call, OllamaReply("2."))
    assert loaded_by("chat", "-m", "llama3.2", "-t", "calculate", "1 + 1?", **env) == [
        0,
        ["ollm.tools.approval", "ollm.cli.approval"],
    ]
    # Named, or asked for: then they are imported.
    server.script(OllamaReply("Hello."))
    code, loaded = loaded_by("chat", "-m", "llama3.2", "--middleware", "redact", "hi", **env)
    assert (code, loaded) == (0, ["ollm.runtime.middleware", "ollm.middleware.redact"])
    server.script(call, OllamaReply("2."))
    args = ("chat", "-m", "llama3.2", "-t", "calculate", "--allow", "calc*", "1 + 1?")
    code, loaded = loaded_by(*args, **env)
    assert code == 0
    assert {"ollm.runtime.middleware", "ollm.runtime.approval", "ollm.runtime.tool_phase"} <= set(
        loaded  # type: ignore[arg-type]
    )


LOADED_BY_A_CHAT = f"""
import json, sys
import anyio
import ollm
from ollm_testutils.mock import Reply, ScriptedProvider


def add(a: int, b: int) -> int:
    '''Add two numbers.

    Args:
        a: The first.
        b: The second.
    '''
    return a + b


async def main(asks):
    provider = ScriptedProvider(Reply(tool_calls=[("add", {{"a": 1, "b": 2}})]), Reply("3."))
    tool = ollm.Tool.from_function(add, approval="ask" if asks else None)
    approve = lambda request: ollm.Approve()
    async with ollm.ChatClient(ollm.Registries(), provider=provider, tools=[tool]) as client:
        result = await client.run("1 + 2?", approver=approve if asks else None)
    assert result.text == "3.", result
    print(json.dumps([m for m in {MACHINERY!r} if m in sys.modules]))


anyio.run(main, sys.argv[1] == "asks")
"""


def test_a_python_chat_with_a_tool_that_does_not_ask_imports_none_of_it() -> None:
    def loaded(asks: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", LOADED_BY_A_CHAT, asks],
            capture_output=True,
            text=True,
            timeout=120,
            env=ollm_env(),
        )
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout.splitlines()[-1]))

    assert loaded("plain") == []
    assert {"ollm.runtime.middleware", "ollm.runtime.approval"} <= set(loaded("asks"))
