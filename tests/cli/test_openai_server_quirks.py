"""``ollm chat -p openai`` on a server that behaves like llama-cpp-python's (issue 41):
``--schema`` on a server without ``json_schema``, a multi-line error on one line of
stderr (the whole under ``--debug``), and usage the server never sends, estimated."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest
from cli_helpers import OLLM, ollm_env

from ollm_testutils import FakeOpenAIServer, OpenAIReply

DUMP = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'temperature'), "
    "'msg': 'Input should be less than or equal to 2', 'input': 9}\n\n  File "
    '"/srv/llama_cpp/server/app.py", line 376, in create_chat_completion\n'
    "    POST /v1/chat/completions\n"
)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(flavor="llamacpp") as running:
        yield running


def chat(
    server: FakeOpenAIServer, *args: str, debug: bool = False
) -> subprocess.CompletedProcess[str]:
    env = ollm_env(OPENAI_BASE_URL=server.base_url, OLLM_LOGS="off")
    first = [OLLM, "--debug"] if debug else [OLLM]
    return subprocess.run(
        [*first, "chat", "-p", "openai", "-m", "gpt-test", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_schema_on_a_server_without_json_schema(server: FakeOpenAIServer) -> None:
    server.accepts_json_schema = False
    server.default_reply = OpenAIReply(['{"name": "Rex", "age": 3}'])
    done = chat(server, "--schema", "name, age int", "--output-retries", "0", "a dog")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"name": "Rex", "age": 3}
    notes = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(notes) == 1, done.stderr
    assert "json_object" in notes[0]
    assert "Input should be 'text' or 'json_object'" in notes[0]
    types = [r.json["response_format"]["type"] for r in server.chat_requests]
    assert types == ["json_schema", "json_object"]


def test_a_multi_line_error_is_one_line_on_stderr(server: FakeOpenAIServer) -> None:
    server.default_reply = OpenAIReply.failure(422, DUMP, type="invalid_request_error")
    done = chat(server, "hi")
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "error[INVALID_REQUEST]" in lines[0]
    assert "body.temperature: Input should be less than or equal to 2" in lines[0]
    assert "app.py" not in done.stderr
    # --debug shows the whole body.
    debug = chat(server, "hi", debug=True)
    assert debug.returncode == 1
    assert "app.py" in debug.stderr


def test_json_usage_the_server_never_sent_is_estimated(server: FakeOpenAIServer) -> None:
    server.sends_usage = False
    server.default_reply = OpenAIReply(["Hello there"])
    done = chat(server, "--json", "hi")
    assert done.returncode == 0, done.stderr
    finish = json.loads(done.stdout.splitlines()[-1])
    assert finish["type"] == "finish"
    assert finish["usage"]["estimated"] is True
    assert finish["usage"]["completion_tokens"] == 3  # "Hello there": 11 characters
