"""``--middleware``, ``--allow``, ``--ask`` and ``--deny`` take a comma list, as
``OLLM_MIDDLEWARE`` does, and add up when repeated; a list they cannot split safely is a
usage error that says to repeat the flag."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from ollm_testutils import FakeOllamaServer, OllamaReply, OllamaToolCall

RunOllm = Callable[..., subprocess.CompletedProcess[str]]

KEY = "sk-proj-abcdefghijklmnop1234567890"
BOTH = OllamaReply(
    tool_calls=[
        OllamaToolCall("calculate", {"expression": "2+2"}),
        OllamaToolCall("current_time", {}),
    ]
)
TOOLS = ["-t", "calculate", "-t", "current_time"]


@pytest.mark.parametrize(
    "flags",
    [
        ["--middleware", "redact,audit"],
        ["--middleware", " redact , audit "],
        ["--middleware", "redact", "--middleware", "audit"],
    ],
)
def test_middleware_takes_a_comma_list_as_its_variable_does(
    run_ollm: RunOllm, server: FakeOllamaServer, tmp_path: Path, flags: list[str]
) -> None:
    server.script(OllamaReply([f"Your key, {KEY}, is noted."]))
    audit = tmp_path / "audit.jsonl"
    done = run_ollm("chat", "-m", "llama3.2", *flags, "hello", OLLM_AUDIT_PATH=str(audit))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Your key, [REDACTED], is noted.\n"  # redact ran
    [line] = [json.loads(x) for x in audit.read_text().splitlines()]  # and audit did
    assert (line["kind"], line["last"]["text"]) == ("request", "hello")


def test_deny_takes_a_comma_list(run_ollm: RunOllm, server: FakeOllamaServer) -> None:
    server.script(BOTH, OllamaReply("Refused."))
    done = run_ollm("chat", "-m", "llama3.2", *TOOLS, "--deny", "calculate,current_*", "go")
    assert done.returncode == 0, done.stderr
    assert "calculate was not run: --deny calculate" in done.stderr
    assert "current_time was not run: --deny current_*" in done.stderr


def test_ask_takes_a_comma_list_and_adds_to_a_repeated_flag(
    run_ollm: RunOllm, server: FakeOllamaServer
) -> None:
    server.script(BOTH, OllamaReply("Not asked."))
    done = run_ollm(
        "chat", "-m", "llama3.2", *TOOLS, "--ask", "nothing_*,calculate", "--ask", "current_time",
        "go",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "calculate was not run: it needs approval (--ask calculate)" in done.stderr
    assert "current_time was not run: it needs approval (--ask current_time)" in done.stderr


def test_allow_takes_a_comma_list(
    run_ollm: RunOllm, server: FakeOllamaServer, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('default = "ask"\n')
    server.script(BOTH, OllamaReply("Done."))
    done = run_ollm(
        "chat", "-m", "llama3.2", *TOOLS, "--allow", "calculate,current_time", "go",
        OLLM_POLICY=str(policy),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "was not run" not in done.stderr
    results = [m for m in server.chat_requests[1].json["messages"] if m["role"] == "tool"]
    assert results[0]["content"] == "4"


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--deny", "fs_{write,delete}", "has a comma inside [...] or {...}"),
        ("--allow", "fs_[a,b]*", "has a comma inside [...] or {...}"),
        ("--ask", "calculate,", "has an empty name"),
        ("--deny", ",", "has an empty name"),
        ("--middleware", "redact,,audit", "has an empty name"),
    ],
)
def test_a_list_that_cannot_be_split_safely_is_a_usage_error(
    run_ollm: RunOllm, server: FakeOllamaServer, flag: str, value: str, said: str
) -> None:
    done = run_ollm("chat", "-m", "llama3.2", "-t", "calculate", flag, value, "go")
    assert done.returncode == 2
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"ollm chat: error: argument {flag}: {value!r} {said}")
    assert "repeat the flag" in last.lower()
    assert server.chat_requests == []
