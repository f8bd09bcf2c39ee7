"""``ollm chat`` with no provider chosen: Ollama when it answers, else the built-in model.

These use the fake Ollama server; the built-in model's own path (the real model, its
set-up) is in tests/llamacpp/test_builtin_model.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from log_helpers import ollm

from ollm_testutils import FakeOllamaServer, OllamaReply

NO_BUILTIN = {"OLLM_BLOCK_PLUGINS": "llamacpp"}


def test_ollama_answering_is_used_with_its_only_model(tmp_path: Path) -> None:
    with FakeOllamaServer() as server:
        server.script(OllamaReply("Rayleigh scattering."))
        result = ollm(tmp_path / "logs.db", "chat", "Why is the sky blue?", OLLAMA_HOST=server.url)
        assert result.returncode == 0, result.stderr
        assert result.stdout == "Rayleigh scattering.\n"
        assert [r.json["model"] for r in server.chat_requests] == ["llama3.2:latest"]
    assert "built-in" not in result.stderr


def test_with_several_models_the_one_used_last_answers(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    with FakeOllamaServer(models=["llama3.2", "qwen3", "gemma3"]) as server:
        server.script(OllamaReply("one"), OllamaReply("two"))
        assert ollm(db, "chat", "-m", "qwen3", "hi", OLLAMA_HOST=server.url).returncode == 0
        result = ollm(db, "chat", "and again", OLLAMA_HOST=server.url)
        assert result.returncode == 0, result.stderr
        assert [r.json["model"] for r in server.chat_requests] == ["qwen3", "qwen3"]


def test_with_several_models_and_no_history_the_error_names_them(tmp_path: Path) -> None:
    with FakeOllamaServer(models=["llama3.2", "qwen3"]) as server:
        result = ollm(tmp_path / "logs.db", "chat", "hi", OLLAMA_HOST=server.url)
        assert result.returncode == 1
        assert "no model chosen" in result.stderr
        assert "llama3.2:latest" in result.stderr
        assert "qwen3:latest" in result.stderr
        assert server.chat_requests == []


def test_provider_flag_and_variable_always_win(tmp_path: Path, closed_port: int) -> None:
    db = tmp_path / "logs.db"
    with FakeOllamaServer() as server:
        flagged = ollm(db, "chat", "-p", "echo", "hello", OLLAMA_HOST=server.url)
        assert (flagged.returncode, flagged.stdout) == (0, "hello\n")
        assert server.chat_requests == []
    down = f"127.0.0.1:{closed_port}"
    variable = ollm(db, "chat", "hello", OLLAMA_HOST=down, OLLM_PROVIDER="echo")
    assert (variable.returncode, variable.stdout) == (0, "hello\n")
    assert "built-in" not in variable.stderr
    assert "No Ollama" not in variable.stderr


def test_a_named_model_with_no_ollama_is_ollamas_error(tmp_path: Path, closed_port: int) -> None:
    result = ollm(
        tmp_path / "logs.db", "chat", "-m", "llama3.2", "hi", OLLAMA_HOST=f"127.0.0.1:{closed_port}"
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error[CONNECTION_FAILED]: Ollama is not running")
    assert "built-in" not in result.stderr


def test_no_ollama_and_no_builtin_model_names_both_ways_forward(
    tmp_path: Path, closed_port: int
) -> None:
    result = ollm(
        tmp_path / "logs.db",
        "chat",
        "hi",
        OLLAMA_HOST=f"127.0.0.1:{closed_port}",
        **NO_BUILTIN,
    )
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error[CONNECTION_FAILED]: No Ollama at 127.0.0.1:{closed_port}")
    assert "ollama serve" in line
    assert "pip install 'ollm-llamacpp[default-model]'" in line
    assert "Traceback" not in result.stderr


def test_at_a_terminal_the_person_picks_among_several_models(
    tmp_path: Path, interactive: Callable[..., Any]
) -> None:
    with FakeOllamaServer(models=["llama3.2", "qwen3"]) as server:
        server.script(OllamaReply("Picked."))
        logs = str(tmp_path / "logs.db")
        with interactive("chat", "hi", OLLAMA_HOST=server.url, OLLM_LOGS_PATH=logs) as (
            process,
            leader,
        ):
            seen = ""
            while "Which one?" not in seen:
                line = process.stderr.readline()
                assert line, f"ollm ended before asking: {seen!r}"
                seen += line
            assert "1) qwen3:latest" in seen
            assert "2) llama3.2:latest" in seen
            os.write(leader, b"nope\n2\n")
            out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        assert "'nope' is none of them." in err
        assert out == "Picked.\n"
        assert [r.json["model"] for r in server.chat_requests] == ["llama3.2:latest"]


def test_a_person_who_leaves_the_question_gets_the_list_and_nothing_is_sent(
    tmp_path: Path, interactive: Callable[..., Any]
) -> None:
    with FakeOllamaServer(models=["llama3.2", "qwen3"]) as server:
        logs = str(tmp_path / "logs.db")
        with interactive("chat", "hi", OLLAMA_HOST=server.url, OLLM_LOGS_PATH=logs) as (
            process,
            leader,
        ):
            os.write(leader, b"/exit\n")
            _out, err = process.communicate(timeout=60)
        assert process.returncode == 1
        assert "no model chosen" in err
        assert server.chat_requests == []
