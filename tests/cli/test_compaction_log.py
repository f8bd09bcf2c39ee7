"""Compaction through ``ollm chat``: a long tool-using chat with ``--compact`` at a small
window is logged whole, with a marker where each request was compacted (``ollm logs
show``, ``--json``); a plugin's compactor is chosen by name, an unknown name is an error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import compactor_plugin
import pytest
from cli_helpers import installed_plugin
from log_helpers import listed, ollm

from ollm_testutils import FakeOllamaServer, OllamaReply

SUPPORT = Path(compactor_plugin.__file__).parent
PAGES = 12


@pytest.fixture
def installed(tmp_path: Path) -> str:
    """A PYTHONPATH on which ``compactor_plugin`` is the plugin ``pages``."""
    return installed_plugin(tmp_path, "pages", "compactor_plugin", SUPPORT)


def script_reading(server: FakeOllamaServer, first: int, last: int) -> None:
    """The model reads pages ``first`` to ``last``, one a turn (with 300 tokens of notes:
    the results cleared are not enough then, the oldest turns go too), then answers."""
    server.script(
        *[
            OllamaReply(
                f"Notes on page {p - 1}: " + "note " * 240, tool_calls=[("read_page", {"page": p})]
            )
            for p in range(first, last + 1)
        ],
        OllamaReply(f"Read pages {first} to {last}."),
    )


def read_book(db: Path, installed: str, server: FakeOllamaServer, *flags: str):  # type: ignore[no-untyped-def]
    """Two chats of one conversation (the second goes on with ``-c``), 12 pages each."""
    common = ["-t", "read_page", "--context-window", "4096", "--max-turns", "20", *flags]
    env = {"PYTHONPATH": installed, "OLLAMA_HOST": server.url}
    script_reading(server, 1, PAGES)
    first = ollm(db, "chat", "-m", "llama3.2", *common, "Read pages 1 to 12.", **env)
    assert first.returncode == 0, first.stderr
    script_reading(server, PAGES + 1, 2 * PAGES)
    second = ollm(db, "chat", "-c", *common, "Now pages 13 to 24.", **env)
    assert second.returncode == 0, second.stderr
    return first, second, env


def test_a_compacted_chat_is_logged_whole_with_its_markers(tmp_path: Path, installed: str) -> None:
    db = tmp_path / "logs.db"
    with FakeOllamaServer() as server:
        first, second, env = read_book(db, installed, server, "--compact", "auto")
        requests = server.chat_requests
    assert len(requests) == 2 * (PAGES + 1)
    for request in requests:  # every request fits the window, as the server counts it
        assert len(json.dumps(request.json["messages"])) // 4 < 4096
    [info] = listed(db)
    shown = ollm(db, "logs", "show", info["id"], "--json", **env)
    assert shown.returncode == 0, shown.stderr
    body = json.loads(shown.stdout)
    messages = body["messages"]
    # All of it: two questions, 24 calls with their results, two answers.
    assert len(messages) == 2 * (2 + 2 * PAGES)
    assert [m["role"] for m in messages].count("tool") == 2 * PAGES
    compactions = body["compactions"]
    assert len(compactions) >= 2
    shown_events = first.stderr.count("compacted the request") + second.stderr.count(
        "compacted the request"
    )
    assert len(compactions) == shown_events  # each one the chats showed, logged
    assert {c["strategy"] for c in compactions} >= {"trim", "clear-results+trim"}
    for c in compactions:
        assert c["strategy"] in ("clear-results", "trim", "clear-results+trim")
        assert c["removed"] > 0
        assert c["tokens_after"] < c["tokens_before"]
        assert 0 < c["messages_after"] <= len(messages)
    positions = [c["messages_after"] for c in compactions]
    assert positions == sorted(positions)
    # A compaction happens before a request: after a tool result, or the second question.
    for at in positions:
        assert messages[at - 1]["role"] in ("tool", "user"), at
    # The second chat's compactions come after its question (message 27).
    assert any(at >= 2 + 2 * PAGES + 1 for at in positions)

    markdown = ollm(db, "logs", "show", info["id"], **env)
    assert markdown.returncode == 0, markdown.stderr
    text = markdown.stdout
    for page in range(1, 2 * PAGES + 1):
        assert f'read_page({{"page":{page}}})' in text, page
    assert text.count("### Result of `read_page`") == 2 * PAGES
    assert "Read pages 1 to 12." in text
    assert "Read pages 13 to 24." in text
    markers = re.findall(
        r"^· compacted \((.+)\): (\d+) messages? (.+), ([\d,]+) → ([\d,]+) tokens$", text, re.M
    )
    assert len(markers) == len(compactions)
    for (strategy, removed, _, before, after), c in zip(markers, compactions, strict=True):
        assert (strategy, int(removed)) == (c["strategy"], c["removed"])
        assert int(before.replace(",", "")) == c["tokens_before"]
        assert int(after.replace(",", "")) == c["tokens_after"]
    # Each marker is where its compaction happened: after that many messages.
    first_marker = compactions[0]["messages_after"]
    before_marker = text.split("· compacted", 1)[0]
    headings = before_marker.count("\n## User") + before_marker.count("\n## Assistant")
    headings += before_marker.count("\n### Result of")
    assert headings == first_marker


def test_a_plugin_compactor_is_chosen_by_name_and_an_unknown_one_listed(
    tmp_path: Path, installed: str
) -> None:
    db = tmp_path / "logs.db"
    with FakeOllamaServer() as server:
        env = {"PYTHONPATH": installed, "OLLAMA_HOST": server.url}
        plugins = ollm(db, "plugins", **env)
        assert "compactors: keep-last, orphan, broken" in plugins.stdout
        assert "compactors: auto, clear-results, trim, summarize" in plugins.stdout
        read_book(db, installed, server, "--compact", "keep-last")
        unknown = ollm(db, "chat", "-m", "llama3.2", "--compact", "keep-lats", "hello", **env)
    cid = listed(db)[-1]["id"]  # the first conversation (the unknown one is logged too)
    shown = json.loads(ollm(db, "logs", "show", cid, "--json", **env).stdout)
    assert shown["compactions"]
    assert {c["strategy"] for c in shown["compactions"]} == {"keep-last"}
    assert unknown.returncode != 0
    assert (
        "error[PLUGIN_ERROR]: Compactor 'keep-lats' is not installed. Available: auto, off, "
        "clear-results, trim, summarize, summarize:MODEL, keep-last, orphan, broken."
    ) in unknown.stderr


@pytest.mark.parametrize(
    ("compactor", "expected"),
    [
        ("orphan", "error[INVALID_HISTORY]: The request was not sent: its history is not valid"),
        (
            "broken",
            "error[PLUGIN_ERROR]: Compactor 'broken' failed: RuntimeError: the compactor broke",
        ),
    ],
)
def test_a_faulty_compactor_ends_the_chat_with_its_code_and_the_log_stays_whole(
    tmp_path: Path, installed: str, compactor: str, expected: str
) -> None:
    db = tmp_path / "logs.db"
    with FakeOllamaServer() as server:
        env = {"PYTHONPATH": installed, "OLLAMA_HOST": server.url}
        common = ["-t", "read_page", "--context-window", "4096", "--max-turns", "20"]
        script_reading(server, 1, PAGES)
        failed = ollm(db, "chat", "-m", "llama3.2", *common, "--compact", compactor, "Read.", **env)
        assert failed.returncode != 0
        assert expected in failed.stderr
        assert "Traceback" not in failed.stderr
        sent = len(server.chat_requests)
        assert 1 < sent < PAGES + 1  # it ended at the first compaction, before sending
        for request in server.chat_requests:  # no result without its call: no orphan
            messages = request.json["messages"]
            calls = sum(len(m.get("tool_calls") or ()) for m in messages)
            assert sum(m["role"] == "tool" for m in messages) == calls
        # The log has every message of it; the next chat goes on with another compactor.
        [info] = listed(db)
        assert info["messages"] == 1 + 2 * sent  # the question, each call and its result
        again = ollm(db, "chat", "-c", *common, "--compact", "auto", "Go on.", **env)
        assert again.returncode == 0, again.stderr
        assert "Read pages 1 to 12." in again.stdout
    [info] = listed(db)
    assert info["messages"] == 1 + 2 * sent + 1 + 2 * (PAGES - sent) + 1
