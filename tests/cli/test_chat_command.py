"""``ollm chat`` end to end: the installed script, a real HTTP server on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from cli_helpers import OLLM, ollm_env

import ollm
from ollm_testutils import FakeOllamaServer, OllamaReply


def test_a_streamed_chat(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.script(OllamaReply(["Hello", ", ", "world."]))
    result = run_ollm("chat", "-m", "llama3.2", "Say hello")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello, world.\n"
    body = server.chat_requests[0].json
    assert body["model"] == "llama3.2"
    assert body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": "Say hello"}]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_chat_with_a_tool_call_on_both_backends(  # type: ignore[no-untyped-def]
    run_ollm, server: FakeOllamaServer, backend: str
) -> None:
    server.script(
        OllamaReply(tool_calls=[("calculate", {"expression": "17 * 3"})]),
        OllamaReply(["It is ", "51."]),
    )
    result = run_ollm(
        "--backend", backend, "chat", "-m", "llama3.2", "-t", "calculate", "What is 17*3?"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "It is 51.\n"
    assert 'calculate(expression="17 * 3")' in result.stderr
    assert "51" in result.stderr
    first, second = (r.json for r in server.chat_requests)
    assert first["tools"][0]["function"]["name"] == "calculate"
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_name"] == "calculate"
    assert tool_message["content"] == "51"
    assert second["messages"][-2]["tool_calls"][0]["function"]["arguments"] == {
        "expression": "17 * 3"
    }


def test_json_events_decode_and_end_with_exactly_one_finish(  # type: ignore[no-untyped-def]
    run_ollm, server: FakeOllamaServer
) -> None:
    server.script(
        OllamaReply(tool_calls=[("calculate", {"expression": "2+2"})]),
        OllamaReply(["Four."], thinking=["hmm"]),
    )
    result = run_ollm("chat", "-m", "llama3.2", "-t", "calculate", "--json", "2+2?")
    assert result.returncode == 0, result.stderr
    events = [ollm.decode_chat_event(line) for line in result.stdout.splitlines()]
    finishes = [e for e in events if isinstance(e, ollm.FinishEvent)]
    assert len(finishes) == 1
    assert events[-1] == finishes[0]
    assert finishes[0].reason == "stop"
    kinds = [type(e).__name__ for e in events]
    assert "ToolCallStartEvent" in kinds
    assert "ToolCallResultEvent" in kinds
    assert [e.text for e in events if isinstance(e, ollm.TextEvent)] == ["Four."]
    assert result.stderr == ""


def test_an_unknown_model_says_how_to_pull_it(run_ollm) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm("chat", "-m", "nope", "hi")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error[MODEL_NOT_FOUND]: ")
    assert "ollm models pull nope" in lines[0]
    assert "Traceback" not in result.stderr


def test_connection_refused_says_to_start_ollama(closed_port: int) -> None:
    result = subprocess.run(
        [OLLM, "chat", "-m", "llama3.2", "hi"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=ollm_env(OLLAMA_HOST=f"127.0.0.1:{closed_port}"),
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"error[CONNECTION_FAILED]: Ollama is not running at http://127.0.0.1:{closed_port}. "
        "Start it with: ollama serve (install it from https://ollama.com/download first). "
        "No Ollama here? ollm chat -p echo answers with no server at all, and -p openai "
        "reaches any OpenAI-compatible server.\n"
    )


def test_no_model_lists_the_models_there_are(run_ollm) -> None:  # type: ignore[no-untyped-def]
    # -p ollama: with no provider chosen, the only model would answer (see
    # test_which_provider_answers.py).
    result = run_ollm("chat", "-p", "ollama", "hi")
    assert result.returncode == 1
    assert "no model chosen" in result.stderr
    assert "llama3.2" in result.stderr


def test_a_piped_prompt_and_a_prompt_together(  # type: ignore[no-untyped-def]
    run_ollm, server: FakeOllamaServer
) -> None:
    server.script(OllamaReply("A summary."))
    result = run_ollm("chat", "-m", "llama3.2", "Summarise this", stdin="Some notes.\n")
    assert result.returncode == 0, result.stderr
    content = server.chat_requests[0].json["messages"][0]["content"]
    assert content == "Some notes.\n\nSummarise this"


def test_dash_reads_the_prompt_from_stdin(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.script(OllamaReply("ok"))
    result = run_ollm("chat", "-m", "llama3.2", "-", stdin="from stdin")
    assert result.returncode == 0, result.stderr
    assert server.chat_requests[0].json["messages"][0]["content"] == "from stdin"


def test_options_reach_the_server(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.script(OllamaReply("ok"))
    result = run_ollm(
        "chat",
        "-m",
        "llama3.2",
        "-s",
        "Be terse.",
        "--temperature",
        "0.2",
        "--max-tokens",
        "64",
        "--seed",
        "7",
        "--context-window",
        "8192",
        "hi",
    )
    assert result.returncode == 0, result.stderr
    body = server.chat_requests[0].json
    assert body["messages"][0] == {"role": "system", "content": "Be terse."}
    assert body["options"]["temperature"] == 0.2
    assert body["options"]["num_predict"] == 64
    assert body["options"]["seed"] == 7
    assert body["options"]["num_ctx"] == 8192


def test_the_environment_chooses_model_and_provider(  # type: ignore[no-untyped-def]
    run_ollm, server: FakeOllamaServer
) -> None:
    server.script(OllamaReply("from env"))
    result = run_ollm("chat", "hi", OLLM_MODEL="llama3.2", OLLM_PROVIDER="ollama")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "from env\n"
    # ...and a flag wins over the environment.
    result = run_ollm("chat", "-p", "echo", "hi", OLLM_MODEL="llama3.2")
    assert result.stdout.strip() == "hi"


def test_the_echo_provider_needs_no_server(closed_port: int) -> None:
    result = subprocess.run(
        [OLLM, "chat", "-p", "echo", "hello there"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=ollm_env(OLLAMA_HOST=f"127.0.0.1:{closed_port}"),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello there\n"


@pytest.mark.parametrize(
    "args",
    [
        ["chat", "--temperature", "hot", "x"],
        ["chat", "--max-turns", "0", "x"],
        ["frobnicate"],
        [],
    ],
)
def test_usage_errors_exit_2(run_ollm, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm(*args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_no_prompt_and_no_terminal_is_a_usage_error(run_ollm) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm("chat", "-m", "llama3.2")
    assert result.returncode == 2
    assert "no prompt given" in result.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("json_mode", [False, True])
def test_ctrl_c_cancels_the_reply_and_a_second_one_is_not_needed(
    server: FakeOllamaServer, json_mode: bool
) -> None:
    server.script(OllamaReply.hanging(["partial ", "answer"]))
    args = [OLLM, "chat", "-m", "llama3.2", "hang please"] + (["--json"] if json_mode else [])
    process = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ollm_env(OLLAMA_HOST=server.url),
    )
    assert process.stdout is not None
    if json_mode:
        while "partial" not in process.stdout.readline():
            pass
    else:
        assert process.stdout.read(8) == "partial "
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    if json_mode:
        last = json.loads(out.splitlines()[-1])
        assert last["type"] == "finish"
        assert last["reason"] == "cancelled"
    else:
        assert "(cancelled)" in err
    assert server.wait_idle(10)
    request = server.chat_requests[0]
    request.wait()
    assert request.disconnected


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_second_ctrl_c_exits_130_even_if_the_abort_is_slow(server: FakeOllamaServer) -> None:
    server.script(OllamaReply.hanging(["partial"]))
    process = subprocess.Popen(
        [OLLM, "chat", "-m", "llama3.2", "x"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ollm_env(OLLAMA_HOST=server.url),
    )
    assert process.stdout is not None
    process.stdout.read(7)
    process.send_signal(signal.SIGINT)
    time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "Traceback" not in err


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_an_interactive_session_keeps_the_history(interactive, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.script(OllamaReply("Nice to meet you, Ada."), OllamaReply("You are Ada."))
    with interactive("chat", "-m", "llama3.2", OLLAMA_HOST=server.url) as (process, leader):
        for line, answer in (
            ("I am Ada.", "Nice to meet you, Ada."),
            ("Who am I?", "You are Ada."),
        ):
            os.write(leader, (line + "\n").encode())
            assert answer in process.stdout.readline()  # each answer before the next line
        os.write(leader, b"/exit\n")
        assert process.wait(timeout=60) == 0
    second = server.chat_requests[1].json["messages"]
    assert [m["content"] for m in second] == [
        "I am Ada.",
        "Nice to meet you, Ada.",
        "Who am I?",
    ]


def test_an_empty_prompt_from_standard_input_is_refused() -> None:
    done = subprocess.run(
        [OLLM, "chat", "-p", "echo", "-"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=ollm_env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert "the prompt is empty" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_interactive_help_stays_local_and_ctrl_c_twice_leaves(interactive) -> None:  # type: ignore[no-untyped-def]
    """/help and unknown /commands are answered locally; one Ctrl-C at the prompt does not
    leave, a second one does."""
    with interactive("chat", "-p", "echo") as (process, leader):
        assert "/help lists the commands" in process.stderr.readline()
        os.write(leader, b"/help\n")
        assert "Commands: /clear" in process.stderr.readline()
        os.write(leader, b"/nope\n")
        assert "/nope is not a command here." in process.stderr.readline()
        assert "Commands: /clear" in process.stderr.readline()
        process.send_signal(signal.SIGINT)
        assert "Ctrl-C again" in process.stderr.readline()
        assert process.poll() is None  # still there after one Ctrl-C
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "/help" not in out  # never sent to the (echo) model


def test_a_token_limit_suggests_the_flag(run_ollm) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm("chat", "-m", "llama3.2", "--context-window", "64", "word " * 200)
    assert result.returncode == 1
    assert "raise the context window (--context-window N)" in result.stderr
    assert "context_window=" not in result.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_is_named_not_reported_as_a_bug() -> None:
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [OLLM, "chat", "-p", "echo", "hello"],
            stdout=full,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=ollm_env(),
            timeout=60,
        )
    assert result.returncode == 1
    assert "No space left on device" in result.stderr
    assert "please report it" not in result.stderr
    assert "Traceback" not in result.stderr
