"""Bytes that are not UTF-8, on every way text enters ``ollm``: each becomes U+FFFD, with
one line on stderr that says how many there were, and nothing else changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from cli_helpers import OLLM, ollm_env

from ollm_testutils import FakeOllamaServer, FakeOpenAIServer, OllamaReply

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="Windows passes arguments as UTF-16, never as bytes"
)

CAFE = "caf\ufffd"
ONE_BYTE = "had 1 byte that is not valid UTF-8; each was replaced with U+FFFD"


def _run(
    args: Sequence[str | bytes], stdin: bytes | None = None, **env: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [OLLM, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        env=ollm_env(**env),
    )


def _sent(body: bytes) -> str:
    """The text of the last message of a request, which must be valid UTF-8 JSON."""
    request = json.loads(body.decode("utf-8"))
    return str(request["messages"][-1]["content"])


@pytest.mark.parametrize("log", [True, False])
def test_piped_bytes_that_are_not_utf8_are_replaced_and_said(log: bool) -> None:
    done = _run(["chat", "-p", "echo", "translate", *([] if log else ["--no-log"])], b"caf\xe9\n")
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert done.stdout.decode() == f"{CAFE}\n\ntranslate\n"
    assert err == f"note: standard input {ONE_BYTE}, the replacement character.\n"


def test_a_prompt_argument_with_such_bytes_reaches_ollama_as_valid_json() -> None:
    with FakeOllamaServer() as server:
        server.script(OllamaReply("ok"))
        done = _run(["chat", "-m", "llama3.2", b"caf\xe9 \xff\xfe"], OLLAMA_HOST=server.url)
        assert done.returncode == 0, done.stderr.decode()
        assert _sent(server.chat_requests[0].body) == f"{CAFE} \ufffd\ufffd"
    notes = [line for line in done.stderr.decode().splitlines() if "U+FFFD" in line]
    assert notes == [
        "note: the command line had 3 bytes that are not valid UTF-8; each was replaced with "
        "U+FFFD, the replacement character."
    ]
    assert "error" not in done.stderr.decode()


def test_piped_text_and_a_prompt_reach_openai_as_valid_json() -> None:
    with FakeOpenAIServer() as server:
        done = _run(
            ["chat", "-p", "openai", "-m", "gpt-test", b"en fran\xe7ais"],
            b"caf\xe9\n",
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test",
        )
        assert done.returncode == 0, done.stderr.decode()
        assert _sent(server.chat_requests[0].body) == f"{CAFE}\n\nen fran\ufffdais"
    err = done.stderr.decode()
    assert f"note: standard input {ONE_BYTE}" in err
    assert f"note: the command line {ONE_BYTE}" in err
    assert "error" not in err


def test_a_file_name_with_such_bytes_is_named_with_the_replacement(tmp_path: Path) -> None:
    """--mcp FILE and --toolset KIND=FILE: the name that is not text is never handed on."""
    for option in (["--mcp", b"caf\xe9.json"], ["--toolset", b"mcp=caf\xe9.json"]):
        done = _run(["chat", "-p", "echo", *option, "hi"])
        err = done.stderr.decode()
        assert done.returncode == 1, err
        assert f"note: the command line {ONE_BYTE}" in err
        assert f"'{CAFE}.json'" in err
        assert "please report" not in err
        assert "Traceback" not in err
        as_json = _run(["chat", "-p", "echo", "--json", *option, "hi"])
        events = [json.loads(line) for line in as_json.stdout.decode("utf-8").splitlines()]
        assert [e["type"] for e in events] == ["error", "finish"]
        assert f"'{CAFE}.json'" in events[0]["message"]


def test_settings_in_the_environment_with_such_bytes_are_replaced_and_said() -> None:
    """OLLM_MODEL, as the -m it stands for, reaches the server as valid JSON."""
    with FakeOpenAIServer(models=[CAFE]) as server:
        environ = ollm_env(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test")
        done = subprocess.run(
            [OLLM, "chat", "-p", "openai", "hi"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
            env={**environ, "OLLM_MODEL": b"caf\xe9"},  # type: ignore[dict-item]
        )
        err = done.stderr.decode()
        assert done.returncode == 0, err
        assert json.loads(server.chat_requests[0].body.decode("utf-8"))["model"] == CAFE
    assert f"note: the environment (OLLM_MODEL) {ONE_BYTE}" in err


def test_interactive_input_with_such_bytes_is_replaced_and_said(interactive) -> None:  # type: ignore[no-untyped-def]
    with FakeOllamaServer() as server:
        server.script(OllamaReply("Bon."))
        session = interactive("chat", "-m", "llama3.2", text=False, OLLAMA_HOST=server.url)
        with session as (process, leader):
            assert b"/help lists the commands" in process.stderr.readline()
            os.write(leader, b"caf\xe9\n")
            assert f"note: your input {ONE_BYTE}".encode() in process.stderr.readline()
            assert b"Bon." in process.stdout.readline()  # the exchange is over
            os.write(leader, b"/exit\n")
            assert process.wait(timeout=60) == 0
        assert _sent(server.chat_requests[0].body) == CAFE
