"""What ``ollm chat -c`` goes on with, and what ``ollm logs`` shows: the conversation
written to last, only what a model answered, its own default model on another provider,
the first question as the preview, failures with their errors, short ids that name one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from log_helpers import listed, ollm, shown, texts

from ollm_testutils import FakeOllamaServer, FakeOpenAIServer, OllamaReply, OpenAIReply


def by_preview(db: Path, preview: str) -> dict[str, Any]:
    [found] = [c for c in listed(db, "-n", "50") if c["preview"] == preview]
    return found


def test_c_goes_on_with_the_conversation_written_to_last_not_the_last_created(
    tmp_path: Path,
) -> None:
    db = tmp_path / "logs.db"
    assert ollm(db, "chat", "-p", "echo", "about owls").returncode == 0
    assert ollm(db, "chat", "-p", "echo", "about cats").returncode == 0
    owls = by_preview(db, "about owls")
    assert ollm(db, "chat", "-p", "echo", "--cid", owls["short_id"], "more owls").returncode == 0
    # The owls were written to last, the cats created last: -c goes on with the owls.
    assert ollm(db, "chat", "-c", "owls again").returncode == 0
    assert texts(db, owls["id"])[4:] == ["owls again", "owls again"]
    assert texts(db, by_preview(db, "about cats")["id"]) == ["about cats", "about cats"]
    # The preview stays the first question, whatever came after it.
    assert [c["preview"] for c in listed(db, "-n", "50")] == ["about owls", "about cats"]


def test_a_refused_prompt_is_logged_short_and_does_not_trap_c(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    assert ollm(db, "chat", "-p", "echo", "I am Ada.").returncode == 0
    huge = "word " * 400_000  # 2 MB, far past the echo model's 32,768 tokens
    for _ in range(5):
        refused = ollm(db, "chat", "-c", "-", stdin=huge)
        assert refused.returncode == 1
        assert "Nothing was sent" in refused.stderr
    assert sum(f.stat().st_size for f in tmp_path.iterdir()) < 1_000_000  # 10 MB refused

    again = ollm(db, "chat", "-c", "Who am I?")
    assert again.returncode == 0, again.stderr
    [conversation] = listed(db, "-n", "50")
    assert texts(db, conversation["id"]) == ["I am Ada.", "I am Ada.", "Who am I?", "Who am I?"]
    responses = shown(db, conversation["id"])["responses"]
    assert [r.get("error_code") for r in responses] == [None, *["TOKEN_LIMIT"] * 5, None]
    assert all(len(r.get("unanswered", "")) < 600 for r in responses)


def test_a_failed_first_request_leaves_no_unanswered_prompt_for_c(
    tmp_path: Path, server: FakeOllamaServer, closed_port: int
) -> None:
    db = tmp_path / "logs.db"
    down = f"http://127.0.0.1:{closed_port}"
    failed = ollm(db, "chat", "-m", "llama3.2", "Are you there?", OLLAMA_HOST=down)
    assert failed.returncode == 1
    assert "not running" in failed.stderr
    server.script(OllamaReply("Nice to meet you, Ada."), OllamaReply("You are Ada."))
    first = ollm(db, "chat", "-c", "I am Ada.", OLLAMA_HOST=server.url)
    assert first.returncode == 0, first.stderr
    assert [m["content"] for m in server.chat_requests[0].json["messages"]] == ["I am Ada."]

    # Down again in the middle: that question is not sent later either.
    assert ollm(db, "chat", "-c", "Hello?", OLLAMA_HOST=down).returncode == 1
    again = ollm(db, "chat", "-c", "Who am I?", OLLAMA_HOST=server.url)
    assert again.returncode == 0, again.stderr
    assert [m["content"] for m in server.chat_requests[1].json["messages"]] == [
        "I am Ada.",
        "Nice to meet you, Ada.",
        "Who am I?",
    ]


def test_logs_show_gives_the_error_of_a_failed_chat(tmp_path: Path, closed_port: int) -> None:
    db = tmp_path / "logs.db"
    down = f"http://127.0.0.1:{closed_port}"
    assert ollm(db, "chat", "-m", "llama3.2", "Are you there?", OLLAMA_HOST=down).returncode == 1
    script = '{"text": "Half an answer", "error": {"message": "the model crashed"}}'
    assert ollm(db, "chat", "-p", "echo", script).returncode == 1
    unanswered, partial = (by_preview(db, "Are you there?"), by_preview(db, script))

    markdown = ollm(db, "logs", "show", unanswered["short_id"])
    assert markdown.returncode == 0, markdown.stderr
    assert "## User (not answered)\n\nAre you there?" in markdown.stdout
    assert "> error[CONNECTION_FAILED]: Ollama is not running" in markdown.stdout
    [response] = shown(db, unanswered["id"])["responses"]
    assert response["error_code"] == "CONNECTION_FAILED"
    assert "not running" in response["error_message"]
    assert response["unanswered"] == "Are you there?"

    markdown = ollm(db, "logs", "show", partial["short_id"])
    assert "Half an answer\n\n> error[PROVIDER_ERROR]: the model crashed" in markdown.stdout
    [response] = shown(db, partial["id"])["responses"]
    assert (response["error_code"], response["error_message"]) == (
        "PROVIDER_ERROR",
        "the model crashed",
    )


def test_c_on_another_provider_takes_that_providers_default_model(
    tmp_path: Path, server: FakeOllamaServer
) -> None:
    db = tmp_path / "logs.db"
    server.script(OllamaReply("Nice to meet you, Ada."))
    assert ollm(db, "chat", "-m", "llama3.2", "I am Ada.", OLLAMA_HOST=server.url).returncode == 0
    moved = ollm(db, "chat", "-c", "-p", "echo", "Who am I?")
    assert moved.returncode == 0, moved.stderr
    [conversation] = listed(db, "-n", "50")
    assert (conversation["provider"], conversation["model"]) == ("echo", "echo")
    # Back on Ollama, which has no default model: asked for one, never the echo's.
    back = ollm(db, "chat", "-c", "-p", "ollama", "Sure?", OLLAMA_HOST=server.url)
    assert back.returncode != 0
    assert "no model chosen" in back.stderr
    assert len(server.chat_requests) == 1
    # The same provider keeps its model, and -m still wins.
    assert ollm(db, "chat", "-c", "-p", "echo", "-m", "parrot", "Again?").returncode == 0
    assert listed(db, "-n", "50")[0]["model"] == "parrot"
    assert ollm(db, "chat", "-c", "Once more?").returncode == 0
    assert listed(db, "-n", "50")[0]["model"] == "parrot"


def test_logs_lists_short_ids_that_each_name_one_conversation(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    for n in range(12):
        assert ollm(db, "chat", "-p", "echo", f"question {n}").returncode == 0
    listing = ollm(db, "logs", "-n", "50")
    assert listing.returncode == 0, listing.stderr
    infos = listed(db, "-n", "50")
    shorts = [i["short_id"] for i in infos]
    assert len(set(shorts)) == 12
    assert all(len(s) == 6 for s in shorts)  # random from the first character
    for info in infos:
        assert f"{info['short_id']}  " in listing.stdout
        assert info["id"] not in listing.stdout
        shown_md = ollm(db, "logs", "show", info["short_id"])
        assert f"# Conversation {info['id']}" in shown_md.stdout


# A stream that a server cut once the model had begun a tool call: one delta, no end.
_TOOL_DELTA = {
    "id": "c1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "gpt-test",
    "choices": [
        {
            "index": 0,
            "delta": {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "calc", "arguments": '{"a"'},
                    }
                ],
            },
            "finish_reason": None,
        }
    ],
}


def _openai(db: Path, server: FakeOpenAIServer, *args: str) -> subprocess.CompletedProcess[str]:
    return ollm(db, "chat", "-p", "openai", "-m", "gpt-test", *args,
                OPENAI_BASE_URL=server.base_url)  # fmt: skip


def test_c_after_a_stream_cut_in_a_tool_call_goes_on_with_the_prompt(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    cut = OpenAIReply(raw=[b"data: " + json.dumps(_TOOL_DELTA).encode() + b"\n\n"])
    with FakeOpenAIServer() as server:
        server.script(cut, OpenAIReply("Ada, 36."))
        failed = _openai(db, server, "I am Ada, 36. Remember it.")
        assert failed.returncode == 1
        assert "error[STREAM_INTERRUPTED]" in failed.stderr
        again = _openai(db, server, "-c", "Who am I?")
        assert again.returncode == 0, again.stderr
        sent = [m["content"] for m in server.chat_requests[1].json["messages"]]
    assert sent == ["I am Ada, 36. Remember it.", "Who am I?"]
    assert "not part of it" not in again.stderr


def test_c_after_a_refused_prompt_says_it_goes_on_without_it(tmp_path: Path) -> None:
    db = tmp_path / "logs.db"
    with FakeOpenAIServer() as server:
        server.script(
            OpenAIReply("Hello, Ada."),
            OpenAIReply.failure(400, "bad request"),
            OpenAIReply("You are Ada."),
            OpenAIReply("Yes."),
        )
        assert _openai(db, server, "I am Ada.").returncode == 0
        refused = _openai(db, server, "-c", "Refuse this.")
        assert refused.returncode == 1
        again = _openai(db, server, "-c", "Who am I?")
        assert again.returncode == 0, again.stderr
        sent = [m["content"] for m in server.chat_requests[2].json["messages"]]
        [notice] = again.stderr.splitlines()
        assert notice.startswith("note: the last prompt of conversation ")
        assert "got no answer (INVALID_REQUEST) and is not part of it" in notice
        # Said once: the next -c goes on from an answered prompt, quietly.
        quiet = _openai(db, server, "-c", "Sure?")
    assert sent == ["I am Ada.", "Hello, Ada.", "Who am I?"]
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
