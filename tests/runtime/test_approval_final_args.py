"""The decision is made on the arguments that will run: after a person's edit
(``stream.approve(id, args=...)``), an approver's (``Approve(args=...)``) and a
middleware's rewrite; a deny always wins, an edit into an ask for another reason does
not run unasked, and path-like globs see the normalised path as well as the text."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import assert_history_valid, client, collect

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

NO_ETC = ollm.ApprovalRule("deny", "write", {"path": "/etc/*"}, reason="not in /etc")


class Writer:
    """A tool with a side effect to count: each write is noted."""

    def __init__(self) -> None:
        self.written: list[str] = []

        def write(path: str) -> str:
            """Write a file.

            Args:
                path: Where.
            """
            self.written.append(path)
            return f"wrote {path}"

        self.tool = ollm.Tool.from_function(write)


def writing(*paths: str) -> Reply:
    return Reply(tool_calls=[("write", {"path": p}) for p in paths])


def of(kind: type[Any], events: list[ollm.ChatEvent]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def decisions(events: list[ollm.ChatEvent]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(d.decision, d.by, dict(d.call.args)) for d in of(ollm.ToolDecisionEvent, events)]


async def edit_to(
    path: str, rules: list[ollm.ApprovalRule] | ollm.ApprovalPolicy, **settings: Any
) -> tuple[Writer, list[ollm.ChatEvent], ollm.ChatClient]:
    """A chat whose call of ``write`` is asked about and approved with ``path``."""
    writer = Writer()
    provider = ScriptedProvider(writing("/tmp/a"), Reply("Done."))
    chat_client = client(provider, tools=[writer.tool], approval=rules, **settings)
    events: list[ollm.ChatEvent] = []
    async with chat_client.chat("write it") as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ollm.ApprovalRequestEvent):
                stream.approve(event.id, args={"path": path})
    return writer, events, chat_client


async def test_an_edit_that_a_deny_rule_matches_is_refused(anyio_backend: str) -> None:
    rules = [ollm.ApprovalRule("ask", "write"), NO_ETC]
    writer, events, chat_client = await edit_to("/etc/passwd", rules)
    assert writer.written == []
    assert decisions(events) == [
        ("allow", "person", {"path": "/etc/passwd"}),
        ("deny", "rule", {"path": "/etc/passwd"}),
    ]
    [result] = of(ollm.ToolCallResultEvent, events)
    assert result.error_code == "TOOL_DENIED"
    assert result.result == (
        "Tool 'write' was not run: the edited arguments are not allowed: not in /etc"
    )
    assert_history_valid(chat_client.conversation)


async def test_an_edit_within_the_rules_runs_with_the_edited_arguments(
    anyio_backend: str,
) -> None:
    rules = [ollm.ApprovalRule("ask", "write"), NO_ETC]
    writer, events, _ = await edit_to("/tmp/b", rules)
    assert writer.written == ["/tmp/b"]
    assert decisions(events) == [("allow", "person", {"path": "/tmp/b"})]


async def test_an_edit_the_rules_ask_about_for_another_reason_does_not_run(
    anyio_backend: str,
) -> None:
    # Asked by the policy's default; the edit falls under an ask rule of its own.
    homes = ollm.ApprovalRule("ask", "write", {"path": "/home/*"}, reason="homes")
    writer, events, _ = await edit_to("/home/ada/x", ollm.ApprovalPolicy((homes,), "ask"))
    assert writer.written == []
    [result] = of(ollm.ToolCallResultEvent, events)
    assert result.error_code == "TOOL_DENIED"
    assert "need an approval of their own (homes)" in result.result
    assert decisions(events)[-1][:2] == ("deny", "rule")


async def test_an_approvers_edit_is_decided_like_a_persons(anyio_backend: str) -> None:
    writer = Writer()
    provider = ScriptedProvider(writing("/tmp/a"), Reply("Done."))
    chat_client = client(
        provider,
        tools=[writer.tool],
        approval=[ollm.ApprovalRule("ask", "write"), NO_ETC],
        approver=lambda request: ollm.Approve(args={"path": "//etc/shadow"}),
    )
    events = await collect(chat_client.chat("write it"))
    assert writer.written == []
    assert decisions(events)[-1] == ("deny", "rule", {"path": "//etc/shadow"})


class Rewriter:
    """A middleware that moves every write to ``path``."""

    name = "rewriter"

    def __init__(self, path: str) -> None:
        self.path = path

    async def before_tool_call(self, ctx: ollm.MiddlewareContext, call: ollm.ToolCall) -> Any:
        return ollm.ToolCall(call.id, call.name, {"path": self.path})


async def test_a_middlewares_rewrite_is_what_the_rules_decide(anyio_backend: str) -> None:
    writer = Writer()
    provider = ScriptedProvider(writing("/tmp/a"), Reply("Done."))
    chat_client = client(
        provider,
        tools=[writer.tool],
        approval=[NO_ETC],
        middleware=[Rewriter("/srv/../etc/hosts")],
    )
    events = await collect(chat_client.chat("write it"))
    assert writer.written == []
    assert decisions(events) == [("deny", "rule", {"path": "/srv/../etc/hosts"})]
    [refused] = of(ollm.ToolDecisionEvent, events)
    assert refused.call.original_args == {"path": "/tmp/a"}
    [result] = of(ollm.ToolCallResultEvent, events)
    assert result.result == "Tool 'write' was not run: not in /etc"


class Asker:
    """A middleware that has a person asked about every call."""

    name = "asker"

    async def before_tool_call(self, ctx: ollm.MiddlewareContext, call: ollm.ToolCall) -> Any:
        return ollm.Ask("the asker asks")


async def test_an_edit_after_a_middlewares_question_is_decided_by_the_rules(
    anyio_backend: str,
) -> None:
    writer, events, _ = await edit_to("/etc/x", [NO_ETC], middleware=[Asker()])
    assert writer.written == []
    assert decisions(events)[-1] == ("deny", "rule", {"path": "/etc/x"})


@pytest.mark.parametrize(
    "path", ["/srv/../etc/passwd", "//etc/passwd", "/etc//passwd", "/etc/./passwd", "/./etc/x"]
)
async def test_a_path_that_comes_to_a_denied_one_is_denied(anyio_backend: str, path: str) -> None:
    writer = Writer()
    provider = ScriptedProvider(writing(path), Reply("Done."))
    chat_client = client(provider, tools=[writer.tool], approval=[NO_ETC])
    events = await collect(chat_client.chat("write it"))
    assert writer.written == []
    assert decisions(events) == [("deny", "rule", {"path": path})]
