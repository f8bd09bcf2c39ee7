"""ollm's own middleware: ``redact`` keeps secrets out of the events and the history,
whole or cut across streamed pieces; ``audit`` writes a JSON line per request and call."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import assert_one_finish_last, client, collect

import ollm
from ollm.middleware import DEFAULT_PATTERNS, Audit, Redact
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

KEY = "sk-proj-abcdefghijklmnop1234567890"


def shown(events: list[ollm.ChatEvent]) -> str:
    """Everything the events would print."""
    return "".join(ollm.encode_event(e).decode() for e in events)


def secret(name: str) -> str:
    """A tool whose result holds a key."""
    return f"the key of {name} is {KEY}."


async def test_a_key_cut_across_streamed_pieces_never_shows(anyio_backend: str) -> None:
    pieces = ["Here it is: sk-proj-", "abcdefghij", "klmnop1234567890", " and", " more."]
    provider = ScriptedProvider(Reply(pieces, thinking=["I see sk-", "proj-abcdefghijklmnop12345"]))
    # By name: ollm's own plugin "middleware" offers it.
    registries = ollm.discover(settings=ollm.PluginSettings(allow=frozenset({"middleware"})))
    chat_client = ollm.ChatClient(registries, provider=provider, middleware=["redact"])
    events = await collect(chat_client.chat(f"my key is {KEY}"))
    assert_one_finish_last(events, "stop")
    assert "sk-proj" not in shown(events)
    text = "".join(e.text for e in events if isinstance(e, ollm.TextEvent))
    assert text == "Here it is: [REDACTED] and more."
    thinking = "".join(e.text for e in events if isinstance(e, ollm.ThinkingEvent))
    assert thinking == "I see [REDACTED]"
    history = chat_client.conversation.to_json().decode()
    assert "sk-proj" not in history
    assert [m.text for m in chat_client.conversation] == [
        "my key is [REDACTED]",
        "Here it is: [REDACTED] and more.",
    ]


async def test_tool_results_and_arguments_are_redacted_the_tool_gets_them_whole(
    anyio_backend: str,
) -> None:
    given: list[str] = []

    @ollm.tool
    def store(value: str) -> str:
        """Store a value.

        Args:
            value: What to store.
        """
        given.append(value)
        return f"stored {value}"

    provider = ScriptedProvider(Reply(tool_calls=[("store", {"value": KEY})]), Reply("Done."))
    chat_client = client(provider, tools=[store], middleware=[Redact()])
    events = await collect(chat_client.chat("keep it"))
    assert given == [KEY]
    assert KEY not in shown(events)
    assert KEY not in chat_client.conversation.to_json().decode()
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert result.result == "stored [REDACTED]"
    assert result.call.args == {"value": "[REDACTED]"}


async def test_patterns_of_ones_own(anyio_backend: str) -> None:
    redact = Redact([*DEFAULT_PATTERNS, r"ACME-\d{6}"], replacement="***")
    events = await collect(
        client(
            ScriptedProvider(Reply(["order ACME-12", "3456 shipped"])), middleware=[redact]
        ).chat("hi")
    )
    assert "".join(e.text for e in events if isinstance(e, ollm.TextEvent)) == "order *** shipped"


async def test_a_long_word_is_not_held_back_forever(anyio_backend: str) -> None:
    word = "x" * 2000
    events = await collect(
        client(ScriptedProvider(Reply([word[:1000], word[1000:]])), middleware=[Redact()]).chat(
            "hi"
        )
    )
    texts = [e.text for e in events if isinstance(e, ollm.TextEvent)]
    assert "".join(texts) == word
    # Only the last characters, where a key may be beginning, wait for the next piece.
    assert texts[0] == word[: 1000 - Redact().hold]


async def test_audit_writes_a_private_line_per_request_and_call(
    anyio_backend: str, tmp_path: Path
) -> None:
    class Doubler:
        def before_tool_call(self, ctx: Any, call: ollm.ToolCall) -> Any:
            return ollm.ToolCall(call.id, call.name, {"name": call.args["name"] * 2})

    path = tmp_path / "audit" / "audit.jsonl"
    provider = ScriptedProvider(
        Reply(tool_calls=[("secret", {"name": "a"})]), Reply("Done."), Reply("Again.")
    )
    chat_client = client(provider, tools=[secret], middleware=[Audit(path), Doubler()])
    await chat_client.run("go")
    await chat_client.run("again")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["request", "tool_call", "request", "request"]
    first, call, second, third = lines
    assert (first["turn"], first["messages"], first["last"]) == (
        1,
        1,
        {"role": "user", "text": "go"},
    )
    assert first["provider"] == "scripted"
    assert first["model"] == "mock-model"
    assert first["tools"] == ["secret"]
    assert first["conversation"] == chat_client.conversation.id
    assert call["call"]["args"] == {"name": "aa"}
    assert call["call"]["original_args"] == {"name": "a"}
    # Keys are redacted in the audit file, redact or not.
    assert call["result"] == {
        "text": "the key of aa is [REDACTED].",
        "is_error": False,
        "images": 0,
    }
    assert (second["turn"], third["turn"], third["messages"]) == (2, 1, 5)
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_audit_sees_a_refused_call(anyio_backend: str, tmp_path: Path) -> None:
    class Guard:
        def before_tool_call(self, ctx: Any, call: Any) -> Any:
            return ollm.Deny("not today")

    path = tmp_path / "audit.jsonl"
    provider = ScriptedProvider(Reply(tool_calls=[("secret", {"name": "a"})]), Reply("Ok."))
    await client(provider, tools=[secret], middleware=[Audit(path), Guard()]).run("go")
    calls = [json.loads(x) for x in path.read_text().splitlines() if '"tool_call"' in x]
    assert calls[0]["result"]["is_error"] is True
    assert "not today" in calls[0]["result"]["text"]


def test_the_audit_file_is_named_by_the_environment(tmp_path: Path) -> None:
    assert Audit.from_env({"OLLM_AUDIT_PATH": str(tmp_path / "a.jsonl")}).path == (
        tmp_path / "a.jsonl"
    )
    beside = Audit.from_env({"OLLM_LOGS_PATH": str(tmp_path / "logs" / "logs.db")})
    assert beside.path == tmp_path / "logs" / "audit.jsonl"


class Leaky:
    """A middleware whose failure quotes a key (as an exception's words may)."""

    async def on_request(self, ctx: Any, request: ollm.ProviderRequest) -> None:
        raise ValueError(f"cannot send with {KEY}")


@pytest.mark.parametrize("order", ["redact-first", "redact-last"])
async def test_another_middlewares_failure_never_shows_a_key(
    anyio_backend: str, order: str
) -> None:
    # The chain's own MIDDLEWARE_FAILED error skips every on_event, redact's included:
    # it is cleaned where it is made, in either order.
    provider = ScriptedProvider(Reply(["never sent"]))
    layers: list[object] = [Redact(), Leaky()]
    chat_client = client(provider, middleware=layers if order == "redact-first" else layers[::-1])
    events = await collect(chat_client.chat("hi"))
    assert_one_finish_last(events, "error")
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "MIDDLEWARE_FAILED"
    assert "Leaky" in error.message or "failed in on_request" in error.message
    assert "sk-proj" not in shown(events)
    assert "[REDACTED]" in error.message
