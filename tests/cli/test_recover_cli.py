"""`ollm chat` runs a tool call the model wrote as text, unless --no-recover."""

from __future__ import annotations

from collections.abc import Callable
from subprocess import CompletedProcess

from ollm_testutils import FakeOllamaServer, OllamaReply

RunOllm = Callable[..., CompletedProcess[str]]

CALL = '{"name": "current_time", "parameters": {}}'


def test_a_call_written_as_text_runs_and_no_recover_shows_it(
    server: FakeOllamaServer, run_ollm: RunOllm
) -> None:
    server.script(OllamaReply([CALL]), OllamaReply(["It is noon."]))
    result = run_ollm("chat", "-m", "llama3.2", "-t", "current_time", "What time is it?")
    assert result.returncode == 0, result.stderr
    assert "It is noon." in result.stdout
    assert CALL not in result.stdout
    assert "as text" in result.stderr  # the notice says the call was recovered
    assert len(server.chat_requests) == 2

    server.script(OllamaReply([CALL]))
    shown = run_ollm(
        "chat", "-m", "llama3.2", "-t", "current_time", "--no-recover", "What time is it?"
    )
    assert shown.returncode == 0, shown.stderr
    assert CALL in shown.stdout
    assert len(server.chat_requests) == 3
