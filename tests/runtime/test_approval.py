"""Tool approval: rules and tools that ask, the question as an event before anything runs,
answers from the stream or an approver, scopes, refusals the model reads, and a chat
stopped while asking that is resumed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, client, collect

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


class Launcher:
    """A tool with a side effect to count: each launch is noted."""

    def __init__(self, approval: ollm.ToolApproval = "ask") -> None:
        self.launched: list[str] = []
        self.started = anyio.Event()

        async def launch(target: str) -> str:
            """Launch a rocket.

            Args:
                target: Where to.
            """
            self.started.set()
            self.launched.append(target)
            return f"launched to {target}"

        self.tool = ollm.Tool.from_function(launch, approval=approval)


def calling(*targets: str) -> Reply:
    return Reply(tool_calls=[("launch", {"target": t}) for t in targets])


def of(kind: type[Any], events: list[ollm.ChatEvent]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


async def test_the_question_comes_before_anything_runs_and_the_call_waits_for_it(
    anyio_backend: str,
) -> None:
    launcher = Launcher()
    provider = ScriptedProvider(calling("moon"), Reply("Launched."))
    chat_client = client(provider, tools=[launcher.tool])
    events: list[ollm.ChatEvent] = []
    async with chat_client.chat("launch") as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ollm.ApprovalRequestEvent):
                assert launcher.launched == []
                assert not of(ollm.ToolCallResultEvent, events)
                assert event.call.name == "launch"
                assert event.reason == "the tool asks to be approved"
                assert stream.pending(event.id)
                assert stream.approve(event.id)
                assert not stream.approve(event.id)  # answered already
    assert launcher.launched == ["moon"]
    assert_one_finish_last(events, "stop")
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ApprovalRequestEvent") < kinds.index("ToolCallResultEvent")
    [decision] = of(ollm.ToolDecisionEvent, events)
    assert (decision.decision, decision.by, decision.scope) == ("allow", "person", "once")
    assert decision.id == of(ollm.ApprovalRequestEvent, events)[0].id
    assert_history_valid(chat_client.conversation)


async def test_a_tool_made_with_the_decorator_asks_when_it_says_so(anyio_backend: str) -> None:
    launched: list[str] = []

    @ollm.tool(approval="ask")
    def launch(target: str) -> str:
        """Launch a rocket.

        Args:
            target: Where to.
        """
        launched.append(target)
        return f"launched to {target}"

    provider = ScriptedProvider(calling("moon"), Reply("Launched."))
    events: list[ollm.ChatEvent] = []
    async with client(provider, tools=[launch]).chat("launch") as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ollm.ApprovalRequestEvent):
                assert launched == []
                assert (event.call.name, event.reason) == (
                    "launch",
                    "the tool asks to be approved",
                )
                stream.approve(event.id)
    assert len(of(ollm.ApprovalRequestEvent, events)) == 1
    assert launched == ["moon"]
    assert_one_finish_last(events, "stop")


async def test_a_denial_goes_to_the_model_with_its_reason_and_the_chat_goes_on(
    anyio_backend: str,
) -> None:
    launcher = Launcher()
    provider = ScriptedProvider(calling("mars"), Reply("As you wish."))
    chat_client = client(provider, tools=[launcher.tool])
    async with chat_client.chat("launch") as stream:
        events = []
        async for event in stream:
            events.append(event)
            if isinstance(event, ollm.ApprovalRequestEvent):
                stream.deny(event.id, "not to Mars this year")
    assert launcher.launched == []
    assert_one_finish_last(events, "stop")
    [result] = of(ollm.ToolCallResultEvent, events)
    assert (result.is_error, result.error_code) == (True, "TOOL_DENIED")
    told = provider.requests[1].messages[-1]
    assert told.role == "tool"
    assert "not to Mars this year" in told.text
    [decision] = of(ollm.ToolDecisionEvent, events)
    assert (decision.decision, decision.by, decision.reason) == (
        "deny",
        "person",
        "not to Mars this year",
    )


async def test_of_two_parallel_calls_only_the_approved_one_runs(anyio_backend: str) -> None:
    launcher = Launcher()
    provider = ScriptedProvider(calling("moon", "mars"), Reply("One of two."))
    chat_client = client(provider, tools=[launcher.tool])
    async with chat_client.chat("launch both") as stream:
        events = []
        async for event in stream:
            events.append(event)
            if isinstance(event, ollm.ApprovalRequestEvent):
                if event.call.args["target"] == "moon":
                    stream.approve(event.id)
                else:
                    stream.deny(event.id)
    assert launcher.launched == ["moon"]
    requests = of(ollm.ApprovalRequestEvent, events)
    assert [r.call.args["target"] for r in requests] == ["moon", "mars"]
    results = of(ollm.ToolCallResultEvent, events)
    assert [(r.is_error, r.error_code) for r in results] == [(False, None), (True, "TOOL_DENIED")]
    assert_history_valid(chat_client.conversation)


async def test_an_approved_call_runs_while_the_next_waits_for_its_answer(
    anyio_backend: str,
) -> None:
    first, second = Launcher(), Launcher()
    second.tool = second.tool.renamed("launch_two")
    provider = ScriptedProvider(
        Reply(tool_calls=[("launch", {"target": "moon"}), ("launch_two", {"target": "mars"})]),
        Reply("Both."),
    )
    chat_client = client(provider, tools=[first.tool, second.tool])
    stream = chat_client.chat("launch both")
    requests: list[ollm.ApprovalRequestEvent] = []
    asked = anyio.Event()

    async def consume() -> None:
        async for event in stream:
            if isinstance(event, ollm.ApprovalRequestEvent):
                requests.append(event)
                if len(requests) == 2:
                    asked.set()

    async def answer() -> None:
        await asked.wait()
        stream.approve(requests[0].id)
        await first.started.wait()  # the first runs; the second is not answered yet
        assert second.launched == []
        stream.approve(requests[1].id)

    with anyio.fail_after(30):  # a hang detector, not a measure
        async with anyio.create_task_group() as group:
            group.start_soon(consume)
            group.start_soon(answer)
    assert (first.launched, second.launched) == (["moon"], ["mars"])


async def test_approval_for_the_chat_asks_once_per_chat_for_the_client_once(
    anyio_backend: str,
) -> None:
    launcher = Launcher()
    provider = ScriptedProvider(
        calling("moon"),
        calling("mars"),
        Reply("Twice."),
        calling("venus"),
        Reply("Again."),
        calling("pluto"),
        Reply("And again."),
    )
    chat_client = client(provider, tools=[launcher.tool])

    async def chat(scope: str) -> list[ollm.ChatEvent]:
        async with chat_client.chat("launch") as stream:
            events = []
            async for event in stream:
                events.append(event)
                if isinstance(event, ollm.ApprovalRequestEvent):
                    stream.approve(event.id, scope=scope)  # type: ignore[arg-type]
        return events

    events = await chat("chat")
    assert len(of(ollm.ApprovalRequestEvent, events)) == 1
    assert [(d.by, d.scope) for d in of(ollm.ToolDecisionEvent, events)] == [
        ("person", "chat"),
        ("chat", "chat"),
    ]
    assert launcher.launched == ["moon", "mars"]
    events = await chat("client")  # a new chat asks again; this answer is for the client
    assert len(of(ollm.ApprovalRequestEvent, events)) == 1
    events = await chat("once")
    assert of(ollm.ApprovalRequestEvent, events) == []
    assert [d.by for d in of(ollm.ToolDecisionEvent, events)] == ["client"]
    assert launcher.launched == ["moon", "mars", "venus", "pluto"]


async def test_an_approver_answers_at_once_and_may_change_the_arguments(
    anyio_backend: str,
) -> None:
    launcher = Launcher()
    asked: list[ollm.ApprovalRequestEvent] = []

    def approver(request: ollm.ApprovalRequestEvent) -> ollm.Approve:
        asked.append(request)
        return ollm.Approve(args={"target": "the moon, safely"})

    provider = ScriptedProvider(calling("the sun"), Reply("Done."))
    chat_client = client(provider, tools=[launcher.tool], approver=approver)
    events = await collect(chat_client.chat("launch"))
    assert launcher.launched == ["the moon, safely"]
    assert [r.call.args for r in asked] == [{"target": "the sun"}]
    assert of(ollm.ApprovalRequestEvent, events) == asked
    [result] = of(ollm.ToolCallResultEvent, events)
    assert result.call.args == {"target": "the moon, safely"}
    assert result.call.original_args == {"target": "the sun"}
    [decision] = of(ollm.ToolDecisionEvent, events)
    assert decision.by == "approver"
    reply = chat_client.conversation.messages[1]
    assert reply.tool_calls[0].original_args == {"target": "the sun"}


@pytest.mark.parametrize(
    ("answer", "launched"),
    [(True, ["moon"]), (False, []), (ollm.Deny("no"), []), ("maybe", [])],
)
async def test_what_an_async_approver_answers(
    anyio_backend: str, answer: Any, launched: list[str]
) -> None:
    launcher = Launcher()

    async def approver(request: ollm.ApprovalRequestEvent) -> Any:
        return answer

    provider = ScriptedProvider(calling("moon"), Reply("Ok."))
    await client(provider, tools=[launcher.tool], approver=approver).run("launch")
    assert launcher.launched == launched


async def test_run_has_no_one_to_ask_so_the_call_is_refused(anyio_backend: str) -> None:
    launcher = Launcher()
    provider = ScriptedProvider(calling("moon"), Reply("Refused, fine."))
    result = await client(provider, tools=[launcher.tool]).run("launch")
    assert result.ok
    assert launcher.launched == []
    [outcome] = result.tool_results
    assert outcome.error_code == "TOOL_DENIED"
    assert "no one could be asked" in outcome.result


async def test_rules_decide_deny_above_ask_above_allow(anyio_backend: str) -> None:
    launcher = Launcher(approval=None)
    rules = [
        ollm.ApprovalRule("allow", "launch"),
        ollm.ApprovalRule("deny", "lau*", args={"target": "sun*"}, reason="too hot"),
        ollm.ApprovalRule("ask", "*", when=lambda args: args["target"] == "mars"),
    ]
    provider = ScriptedProvider(calling("moon", "sun", "mars"), Reply("Ok."))
    chat_client = client(provider, tools=[launcher.tool], approval=rules, approver=lambda r: True)
    events = await collect(chat_client.chat("launch"))
    assert sorted(launcher.launched) == ["mars", "moon"]
    decisions = {
        d.call.args["target"]: (d.decision, d.by) for d in of(ollm.ToolDecisionEvent, events)
    }
    assert decisions == {
        "moon": ("allow", "rule"),
        "sun": ("deny", "rule"),
        "mars": ("allow", "approver"),
    }
    [request] = of(ollm.ApprovalRequestEvent, events)
    assert request.call.args == {"target": "mars"}
    [sun] = [r for r in of(ollm.ToolCallResultEvent, events) if r.call.args["target"] == "sun"]
    assert "too hot" in sun.result


async def test_a_tool_decides_by_its_arguments(anyio_backend: str) -> None:
    launcher = Launcher(approval=lambda args: "deny" if args["target"] == "sun" else "allow")
    provider = ScriptedProvider(calling("moon", "sun"), Reply("Ok."))
    events = await collect(client(provider, tools=[launcher.tool]).chat("launch"))
    assert launcher.launched == ["moon"]
    assert [(d.decision, d.by) for d in of(ollm.ToolDecisionEvent, events)] == [
        ("allow", "tool"),
        ("deny", "tool"),
    ]


async def test_a_policy_default_of_ask_asks_for_every_tool(anyio_backend: str) -> None:
    launcher = Launcher(approval=None)
    provider = ScriptedProvider(calling("moon"), Reply("Ok."))
    asked: list[str] = []

    def approver(request: ollm.ApprovalRequestEvent) -> bool:
        asked.append(request.call.name)
        return False

    await client(
        provider,
        tools=[launcher.tool],
        approval=ollm.ApprovalPolicy(default="ask"),
        approver=approver,
    ).run("launch")
    assert (asked, launcher.launched) == (["launch"], [])


async def test_an_abort_while_asking_runs_nothing(anyio_backend: str) -> None:
    launcher = Launcher()
    provider = ScriptedProvider(calling("moon", "mars"), Reply("never"))
    chat_client = client(provider, tools=[launcher.tool])
    async with chat_client.chat("launch") as stream:
        events = []
        async for event in stream:
            events.append(event)
            if isinstance(event, ollm.ApprovalRequestEvent) and event.call.args["target"] == "mars":
                stream.abort()
    assert launcher.launched == []
    assert_one_finish_last(events, "cancelled")
    assert len(provider.requests) == 1
    results = of(ollm.ToolCallResultEvent, events)
    assert [r.error_code for r in results] == ["CANCELLED", "CANCELLED"]
    assert "while a person was asked about it" in results[0].result
    assert_history_valid(chat_client.conversation)
    assert not stream.pending(of(ollm.ApprovalRequestEvent, events)[0].id)


async def test_the_reply_is_in_the_history_while_a_person_is_asked(anyio_backend: str) -> None:
    launcher = Launcher()
    provider = ScriptedProvider(calling("moon"), Reply("Ok."))
    chat_client = client(provider, tools=[launcher.tool])
    async with chat_client.chat("launch") as stream:
        async for event in stream:
            if isinstance(event, ollm.ApprovalRequestEvent):
                assert [m.role for m in chat_client.conversation] == ["user", "assistant"]
                assert chat_client.conversation.unanswered_calls == (event.call,)
                stream.approve(event.id)
    assert [m.role for m in chat_client.conversation] == ["user", "assistant", "tool", "assistant"]


async def test_calls_left_unanswered_are_asked_about_again_and_the_chat_resumes(
    anyio_backend: str,
) -> None:
    launcher = Launcher()
    # A conversation as a chat stopped while asking leaves it (logged, then loaded).
    call = ollm.ToolCall("call_1", "launch", {"target": "moon"})
    stopped = ollm.Conversation(
        [ollm.Message.user("launch"), ollm.Message.assistant(tool_calls=(call,))]
    )
    provider = ScriptedProvider(Reply("Launched, at last."))
    chat_client = client(provider, tools=[launcher.tool], conversation=stopped)
    events: list[ollm.ChatEvent] = []
    async with chat_client.chat() as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ollm.ApprovalRequestEvent):
                assert event.call == call
                stream.approve(event.id)
    assert launcher.launched == ["moon"]
    assert_one_finish_last(events, "stop")
    assert [m.role for m in chat_client.conversation] == ["user", "assistant", "tool", "assistant"]
    assert provider.requests[0].messages[-1].role == "tool"
    assert_history_valid(chat_client.conversation)


async def test_a_middleware_may_ask_too(anyio_backend: str) -> None:
    launcher = Launcher(approval=None)

    class Cautious:
        def before_tool_call(self, ctx: Any, call: ollm.ToolCall) -> Any:
            return ollm.Ask("a cautious middleware")

    asked: list[str] = []

    def approver(request: ollm.ApprovalRequestEvent) -> bool:
        asked.append(request.reason)
        return True

    provider = ScriptedProvider(calling("moon"), Reply("Ok."))
    await client(provider, tools=[launcher.tool], middleware=[Cautious()], approver=approver).run(
        "go"
    )
    assert (asked, launcher.launched) == (["a cautious middleware"], ["moon"])


async def test_approval_settings_are_checked() -> None:
    with pytest.raises(TypeError, match="ApprovalPolicy"):
        ollm.ChatClient(ollm.Registries(), approval="ask")  # type: ignore[arg-type]
    with pytest.raises(ollm.InvalidToolError, match="approval must be"):
        ollm.tool(lambda: 1, name="x", approval="sometimes")
    with pytest.raises(ValueError, match="scope"):
        ollm.Approve("forever")  # type: ignore[arg-type]
