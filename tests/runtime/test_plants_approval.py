"""Approval scopes that stay with their tool, arguments that are not text, and a tool's
own check that answers nonsense: bugs planted by hand that the first tests let through
(tests/plants.toml, module ``approval``)."""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, client

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


class Tools:
    """Two tools that ask, each noting its runs."""

    def __init__(self) -> None:
        self.ran: list[str] = []

        async def launch(target: str) -> str:
            """Launch a rocket.

            Args:
                target: Where to.
            """
            self.ran.append(f"launch {target}")
            return "launched"

        async def land(target: str) -> str:
            """Land a rocket.

            Args:
                target: Where.
            """
            self.ran.append(f"land {target}")
            return "landed"

        self.tools = [
            ollm.Tool.from_function(launch, approval="ask"),
            ollm.Tool.from_function(land, approval="ask"),
        ]


async def _answered(
    chat_client: ollm.ChatClient, answer: Any
) -> tuple[list[ollm.ChatEvent], list[ollm.ApprovalRequestEvent]]:
    """The chat's events, each question answered by ``answer(stream, request)``."""
    events: list[ollm.ChatEvent] = []
    asked: list[ollm.ApprovalRequestEvent] = []
    async with chat_client.chat("go") as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ollm.ApprovalRequestEvent):
                asked.append(event)
                answer(stream, event)
    return events, asked


async def test_an_approval_for_the_chat_is_for_that_tool_alone(anyio_backend: str) -> None:
    tools = Tools()
    provider = ScriptedProvider(
        Reply(tool_calls=[("launch", {"target": "moon"})]),
        Reply(tool_calls=[("land", {"target": "moon"})]),
        Reply(tool_calls=[("launch", {"target": "mars"})]),
        Reply("Done."),
    )
    chat_client = client(provider, tools=tools.tools)

    def answer(stream: ollm.ChatStream, request: ollm.ApprovalRequestEvent) -> None:
        if request.call.name == "launch":
            stream.approve(request.id, scope="chat")
        else:
            stream.deny(request.id, "not now")

    events, asked = await _answered(chat_client, answer)
    assert_one_finish_last(events, "stop")
    # launch was approved for the chat: its second call is not asked about; land is.
    assert [r.call.name for r in asked] == ["launch", "land"]
    assert tools.ran == ["launch moon", "launch mars"]
    assert_history_valid(chat_client.conversation)


async def test_an_approval_for_the_chat_leaves_another_tools_question_open(
    anyio_backend: str,
) -> None:
    tools = Tools()
    provider = ScriptedProvider(
        Reply(tool_calls=[("launch", {"target": "moon"}), ("land", {"target": "mars"})]),
        Reply("One of two."),
    )
    chat_client = client(provider, tools=tools.tools)
    waiting: list[ollm.ApprovalRequestEvent] = []
    denied: list[bool] = []

    def answer(stream: ollm.ChatStream, request: ollm.ApprovalRequestEvent) -> None:
        # Both questions are open before either is answered.
        waiting.append(request)
        if len(waiting) < 2:
            return
        (launch,) = [r for r in waiting if r.call.name == "launch"]
        (land,) = [r for r in waiting if r.call.name == "land"]
        stream.approve(launch.id, scope="chat")
        denied.append(stream.deny(land.id, "not now"))

    events, asked = await _answered(chat_client, answer)
    assert_one_finish_last(events, "stop")
    assert sorted(r.call.name for r in asked) == ["land", "launch"]
    assert denied == [True]  # still open when its own answer came
    assert tools.ran == ["launch moon"]


@pytest.mark.parametrize(
    ("value", "glob"),
    [(True, "true"), (False, "false"), (None, "null"), ([1, 2], "[[]1,2[]]"), (2.5, "2.5")],
)
def test_an_argument_that_is_not_text_is_matched_as_json(value: Any, glob: str) -> None:
    rule = ollm.ApprovalRule("deny", "rm", args={"force": glob})
    assert rule.matches(ollm.ToolCall("1", "rm", {"force": value}))
    decision = ollm.ApprovalPolicy((rule,)).decide(ollm.ToolCall("1", "rm", {"force": value}))
    assert decision.action == "deny"


@pytest.mark.parametrize("answer", ["yes", None, True, 1])
def test_a_tool_check_that_answers_nonsense_asks(answer: Any) -> None:
    tool = ollm.Tool.from_schema(ollm.ToolSchema("rm"), lambda **_: "", approval=lambda a: answer)
    decision = ollm.ApprovalPolicy().decide(ollm.ToolCall("1", "rm", {}), tool)
    assert (decision.action, decision.by) == ("ask", "tool")
    assert repr(answer) in decision.reason


async def test_a_tool_check_that_answers_nonsense_is_refused_with_no_one_to_ask(
    anyio_backend: str,
) -> None:
    ran: list[str] = []
    tool = ollm.Tool.from_schema(
        ollm.ToolSchema("rm", "Remove a file.", {"type": "object", "properties": {}}),
        lambda **_: ran.append("rm") or "removed",
        approval=lambda args: "sure",
    )
    provider = ScriptedProvider(Reply(tool_calls=[("rm", {})]), Reply("ok"))
    result = await client(provider, tools=[tool]).run("clean up")
    assert ran == []
    assert result.error is None
