"""ollm chat's flags for long conversations: --context-window auto, --on-truncation, --compact."""

from __future__ import annotations

import os
import sys

import pytest

from ollm_testutils import FakeOllamaServer, OllamaReply


def test_context_window_auto_sends_a_bucket(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.script(OllamaReply(["ok"]))
    result = run_ollm("chat", "-m", "llama3.2", "--context-window", "auto", "word " * 4000)
    assert result.returncode == 0, result.stderr
    assert server.chat_requests[0].json["options"]["num_ctx"] == 8192
    assert "Context window for llama3.2: 8192 tokens" in result.stderr


def test_on_truncation_error_ends_context_exceeded(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.add_model("small", capabilities=["completion"], context_length=4096)
    server.context_overflow = "truncate"
    result = run_ollm(
        "chat",
        "-m",
        "small",
        "--context-window",
        "16384",
        "--on-truncation",
        "error",
        "word " * 7200,
    )
    assert result.returncode != 0
    assert "error[CONTEXT_EXCEEDED]" in result.stderr
    assert "evaluated 4096 tokens of about 9000 sent" in result.stderr


@pytest.mark.parametrize("on_truncation", ["notice", "error"])
def test_a_cold_model_that_cut_the_prompt_is_caught_on_the_first_request(  # type: ignore[no-untyped-def]
    run_ollm, server: FakeOllamaServer, on_truncation: str
) -> None:
    # Not loaded, no window asked for: ollm assumes 4096 and sends 3,000 tokens; the
    # server loads the model with 2048 (its trained length) and evaluates the end only.
    server.add_model("tiny", capabilities=["completion"], context_length=2048)
    server.context_overflow = "truncate"
    server.script(OllamaReply(["ok"]))
    result = run_ollm("chat", "-m", "tiny", "--on-truncation", on_truncation, "word " * 2400)
    assert server.evaluated == [2048]
    assert "evaluated 2048 tokens of about 3000 sent" in result.stderr
    if on_truncation == "error":
        assert result.returncode != 0
        assert "error[CONTEXT_EXCEEDED]" in result.stderr
    else:
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "ok"


def test_a_bad_context_window_is_refused_in_words(run_ollm) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm("chat", "-m", "llama3.2", "--context-window", "big", "hi")
    assert result.returncode != 0
    assert "'big' is not a whole number" in result.stderr


def test_tools_max_sends_the_relevant_tools_only(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.script(OllamaReply(["ok"]))
    result = run_ollm(
        "chat", "-m", "llama3.2", "-t", "calculate", "-t", "current_time", "--tools-max", "1",
        "What time is it now?",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    tools = [t["function"]["name"] for t in server.chat_requests[0].json["tools"]]
    assert tools == ["current_time"]


def _sent_with_tools_embed(run_ollm, server: FakeOllamaServer) -> tuple[list[str], str]:  # type: ignore[no-untyped-def]
    """The tools the one request carried with --tools-max 1 --tools-embed, and stderr."""
    server.script(OllamaReply(["ok"]))
    result = run_ollm(
        "chat", "-m", "llama3.2", "-t", "calculate", "-t", "current_time", "--tools-max", "1",
        "--tools-embed", "nomic-embed-text", "What time is it now?",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [t["function"]["name"] for t in server.chat_requests[0].json["tools"]], result.stderr


def test_tools_embed_ranks_by_the_server_embeddings(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.add_model("nomic-embed-text", capabilities=["embedding"])
    # "What time is it" and the calculator mean the same, to this embedding model.
    server.embed_as("What time", [1.0]).embed_as("calculate", [1.0])
    tools, _ = _sent_with_tools_embed(run_ollm, server)
    assert tools == ["calculate"]
    (embed,) = server.requests_to("/api/embed")
    assert embed.json["model"] == "nomic-embed-text"


def test_tools_embed_without_the_model_warns_and_goes_on(
    run_ollm, server: FakeOllamaServer
) -> None:  # type: ignore[no-untyped-def]
    tools, stderr = _sent_with_tools_embed(run_ollm, server)
    assert tools == ["current_time"]
    assert "could not rank the tools by nomic-embed-text embeddings" in stderr


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_interactive_compact_compacts_the_next_request(interactive) -> None:  # type: ignore[no-untyped-def]
    with interactive("chat", "-p", "echo") as (process, leader):
        assert "/help lists the commands" in process.stderr.readline()
        for number in range(3):
            os.write(leader, f"question {number} {'y' * 400}\n".encode())
            assert f"question {number}" in process.stdout.readline()
        os.write(leader, b"/compact\n")
        assert "the next request leaves about half" in process.stderr.readline()
        os.write(leader, b"question 3\n")
        assert "question 3" in process.stdout.readline()
        line = process.stderr.readline()
        assert "compacted the request" in line, line
        os.write(leader, b"/exit\n")
        process.communicate(timeout=30)
    assert process.returncode == 0
