"""Typed output through the ``tool`` output strategy (the value as the arguments of a
forced call of ``final_result``) on the fake Ollama, OpenAI-compatible, Gemini and
Anthropic servers, asyncio and trio, through the public API: the tool and the forced
choice on each wire (and no native constraint), the value back as the reply's text with
no call left in the history, corrections, a schema whose root is not an object, a tool
of the chat before the value, a tool of the chat named ``final_result``, prose instead
of the call, partial values from streamed arguments, and the fallback to ``prompted``
for a model without native tools."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest
from pydantic_dog import Dog
from typed_fakes import Fake, P

import ollm
import ollm_react.plugin
from ollm_testutils import OpenAIReply, Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

DOG = {"name": "Rex", "age": 3}
# The notices of a switch of output strategy (Ollama says it loads a model, too).
SWITCHES = ("output_strategy", "format_ignored")
PROSE = "$: the reply did not call final_result: it is prose, not the value"


@pytest.fixture(params=["ollama", "openai"])
def local(request: pytest.FixtureRequest) -> Iterator[Fake]:
    """The two servers a local model is most often behind."""
    with Fake(str(request.param)) as made:
        yield made


def looker(looked: list[str] | None = None) -> Callable[[str], str]:
    """A tool of the chat, ``lookup``, which notes the breeds it was asked about."""

    def lookup(breed: str) -> str:
        """Look a breed up."""
        if looked is not None:
            looked.append(breed)
        return "lives 12 years"

    return lookup


async def events_of(stream: ollm.ChatStream) -> list[ollm.ChatEvent]:
    async with stream:
        return [event async for event in stream]


def tools_offered(fake: Fake, body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The tools a request offered, by name, with their parameters' schema."""
    tools = body.get("tools") or []
    if fake.name == "gemini":
        declared = [d for t in tools for d in t.get("functionDeclarations", [])]
        return {
            d["name"]: d.get("parametersJsonSchema") or d.get("parameters") or {} for d in declared
        }
    if fake.name == "anthropic":
        return {t["name"]: t["input_schema"] for t in tools}
    return {t["function"]["name"]: t["function"]["parameters"] for t in tools}


def forced(fake: Fake, body: dict[str, Any], name: str | None) -> Any:
    """What the wire says to force a call of ``name`` (``None``: of any tool)."""
    if fake.name == "ollama":  # no tool_choice: ollm offers the forced tool alone
        return None
    if fake.name == "openai":
        return {"type": "function", "function": {"name": name}} if name else "required"
    if fake.name == "gemini":
        config: dict[str, Any] = {"mode": "ANY"}
        if name:
            config["allowedFunctionNames"] = [name]
        return {"functionCallingConfig": config}
    return {"type": "tool", "name": name} if name else {"type": "any"}


def choice_of(fake: Fake, body: dict[str, Any]) -> Any:
    if fake.name == "gemini":
        return body.get("toolConfig")
    return body.get("tool_choice")


async def test_the_value_comes_as_the_forced_call_and_the_history_holds_it_as_text(
    fake: Fake,
) -> None:
    fake.script(fake.call("final_result", DOG))
    # A response_format of the chat's own is left out too: the value comes as the call.
    async with fake.client(
        system="Be brief.", output_strategy="tool", response_format="json"
    ) as client:
        events = await events_of(client.chat("Invent a dog.", output=P))
        history = client.conversation.messages
    assert [e.value for e in events if isinstance(e, ollm.OutputEvent)] == [P("Rex", 3)]
    assert not any(
        isinstance(e, ollm.ToolCallStartEvent | ollm.ToolCallResultEvent) for e in events
    )
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "stop"
    # The value is the reply's text; the call is nowhere in the history.
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[1].tool_calls == ()
    assert msgspec.json.decode(history[1].text) == DOG
    (body,) = fake.bodies
    offered = tools_offered(fake, body)
    assert list(offered) == ["final_result"]
    assert set(offered["final_result"]["properties"]) == {"name", "age"}
    assert choice_of(fake, body) == forced(fake, body, "final_result")
    assert fake.constraint(body) is None  # no response_format, format or responseSchema
    system = fake.system(body)
    assert system.startswith("Be brief.")
    assert "final_result" in system


async def test_arguments_that_do_not_validate_are_corrected_then_output_invalid(
    local: Fake,
) -> None:
    wrong = [{"name": "Rex", "age": "three"}, {"name": "Rex", "age": "3"}, {"name": "Rex"}]
    local.script(*(local.call("final_result", args) for args in wrong), local.text("Fine."))
    async with local.client(output_strategy="tool") as client:
        events = await events_of(client.chat("Invent a dog.", output=P))
        (error,) = [e for e in events if isinstance(e, ollm.ErrorEvent)]
        assert error.code == "OUTPUT_INVALID"
        assert "after 2 corrections" in error.message
        assert error.errors == ("$: object missing required field age",)
        bodies = local.bodies
        assert len(bodies) == 3
        correction = local.last_user_text(bodies[1])
        assert "$.age" in correction
        assert "Call final_result again" in correction
        # Every request forces the tool, the corrections' too.
        assert [list(tools_offered(local, b)) for b in bodies] == [["final_result"]] * 3
        history = client.conversation.messages
        assert [m.role for m in history] == ["user", "assistant"] * 3
        assert all(m.tool_calls == () for m in history)
        assert [msgspec.json.decode(history[i].text) for i in (1, 3, 5)] == wrong
        # The conversation goes on, without the output tool.
        assert (await client.run("Thanks.")).text == "Fine."
        assert "tools" not in local.bodies[-1] or not local.bodies[-1]["tools"]


async def test_a_corrected_call_gives_the_value(local: Fake) -> None:
    local.script(
        local.call("final_result", {"name": "Rex", "age": "three"}),
        local.call("final_result", DOG),
    )
    async with local.client(output_strategy="tool") as client:
        assert await client.run("Invent a dog.", output=P) == P("Rex", 3)


async def test_arguments_that_are_not_an_object_are_judged_as_they_came() -> None:
    broken = '{"name": "Rex", "age": '
    provider = ScriptedProvider(
        Reply(tool_calls=[ollm.ToolCall("c1", "final_result", {}, invalid_args=broken)]),
        Reply(tool_calls=[("final_result", DOG)]),
    )
    async with ollm.ChatClient(
        ollm.Registries(), provider=provider, output_strategy="tool"
    ) as client:
        assert await client.run("Invent a dog.", output=P) == P("Rex", 3)
        history = client.conversation.messages
    assert history[1].text == broken  # as the model wrote it
    correction = history[2].text
    assert "not valid JSON" in correction
    assert "Call final_result again" in correction


@pytest.mark.parametrize(
    ("output", "args", "value"),
    [
        (list[int], {"value": [1, 2, 3]}, [1, 2, 3]),
        (list[P], {"value": [DOG]}, [P("Rex", 3)]),
        (int, {"value": 7}, 7),
    ],
)
async def test_a_schema_whose_root_is_not_an_object_is_wrapped_and_unwrapped(
    local: Fake, output: Any, args: dict[str, Any], value: Any
) -> None:
    local.script(local.call("final_result", args))
    async with local.client(output_strategy="tool") as client:
        assert await client.run("Give it.", output=output) == value
        history = client.conversation.messages
    assert msgspec.json.decode(history[1].text) == args["value"]
    (body,) = local.bodies
    parameters = tools_offered(local, body)["final_result"]
    assert parameters["type"] == "object"
    assert parameters["required"] == ["value"]
    inner = parameters["properties"]["value"]
    assert inner["type"] == ("integer" if output is int else "array")
    if output == list[P]:
        # The definitions are at the root, where the references point.
        assert "$defs" not in inner
        assert set(parameters["$defs"]) == {"P"}
        assert inner["items"] == {"$ref": "#/$defs/P"}


async def test_a_tool_of_the_chat_runs_then_the_value_comes(fake: Fake) -> None:
    looked: list[str] = []
    lookup = looker(looked)

    fake.script(fake.call("lookup", {"breed": "collie"}), fake.call("final_result", DOG))
    async with fake.client(tools=[lookup], output_strategy="tool") as client:
        events = await events_of(client.chat("A collie, please.", output=P))
        history = client.conversation.messages
    assert looked == ["collie"]
    assert [e.value for e in events if isinstance(e, ollm.OutputEvent)] == [P("Rex", 3)]
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert [c.name for c in history[1].tool_calls] == ["lookup"]
    assert history[3].tool_calls == ()
    for body in fake.bodies:
        assert list(tools_offered(fake, body)) == ["lookup", "final_result"]
        # A call is required; the chat's tools may come first.
        assert choice_of(fake, body) == forced(fake, body, None)


async def test_a_tool_called_beside_the_output_tool_runs_and_the_model_answers_again() -> None:
    looked: list[str] = []
    lookup = looker(looked)

    with Fake("openai") as fake:
        fake.script(
            OpenAIReply(tool_calls=[("lookup", {"breed": "collie"}), ("final_result", DOG)]),
            fake.call("final_result", {"name": "Lass", "age": 12}),
        )
        async with fake.client(tools=[lookup], output_strategy="tool") as client:
            value = await client.run("A collie, please.", output=P)
            history = client.conversation.messages
    assert looked == ["collie"]
    assert value == P("Lass", 12)
    # The first reply kept its value as text and its call of lookup, with its result.
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert [c.name for c in history[1].tool_calls] == ["lookup"]
    assert msgspec.json.decode(history[1].text) == DOG
    assert history[2].tool_call_id == history[1].tool_calls[0].id


@pytest.mark.parametrize("framing", ["split", "whole"])
async def test_a_second_call_of_the_output_tool_is_dropped(framing: Any) -> None:
    second = {"name": "Ace", "age": 5}
    with Fake("openai") as fake:
        fake.script(
            OpenAIReply(
                tool_calls=[("final_result", DOG), ("final_result", second)],
                tool_call_framing=framing,
            )
        )
        async with fake.client(output_strategy="tool") as client:
            events = await events_of(client.chat("Invent a dog.", output=P))
            history = client.conversation.messages
    assert [e.value for e in events if isinstance(e, ollm.OutputEvent)] == [P("Rex", 3)]
    assert [m.role for m in history] == ["user", "assistant"]
    assert msgspec.json.decode(history[1].text) == DOG


async def test_a_tool_of_the_chat_named_final_result_keeps_its_name(local: Fake) -> None:
    ran: list[str] = []

    def final_result(note: str) -> str:
        """The user's own tool of that name."""
        ran.append(note)
        return "noted"

    local.script(local.call("final_result", {"note": "first"}), local.call("final_result_1", DOG))
    async with local.client(tools=[final_result], output_strategy="tool") as client:
        value = await client.run("Invent a dog.", output=P)
    assert value == P("Rex", 3)
    assert ran == ["first"]
    first, _ = local.bodies
    offered = tools_offered(local, first)
    assert list(offered) == ["final_result", "final_result_1"]
    assert set(offered["final_result_1"]["properties"]) == {"name", "age"}
    assert "final_result_1" in local.system(first)


async def test_prose_instead_of_the_call_is_corrected_naming_the_tool(local: Fake) -> None:
    local.script(local.text("Rex is a good dog, three years old."), local.call("final_result", DOG))
    async with local.client(output_strategy="tool") as client:
        events = await events_of(client.chat("Invent a dog.", output=P))
    assert [e.value for e in events if isinstance(e, ollm.OutputEvent)] == [P("Rex", 3)]
    # Named `tool`, the strategy stays (no switch, no notice); the prose cost a retry.
    assert not [e for e in events if isinstance(e, ollm.NoticeEvent) and e.kind in SWITCHES]
    _, second = local.bodies
    correction = local.last_user_text(second)
    assert "did not call final_result" in correction
    assert "Call final_result again" in correction
    assert list(tools_offered(local, second)) == ["final_result"]


async def test_prose_until_the_retries_run_out_is_output_invalid_naming_the_tool(
    local: Fake,
) -> None:
    local.script(local.text("A dog."), local.text("Another dog."))
    async with local.client(output_strategy="tool", output_retries=1) as client:
        with pytest.raises(ollm.OutputInvalidError) as raised:
            await client.run("Invent a dog.", output=P)
    assert raised.value.errors == (PROSE,)
    assert raised.value.raw == "Another dog."


async def test_the_value_written_as_text_instead_of_the_call_is_taken(local: Fake) -> None:
    local.script(local.text('{"name": "Rex", "age": 3}'))
    async with local.client(output_strategy="tool") as client:
        assert await client.run("Invent a dog.", output=P) == P("Rex", 3)
    assert len(local.bodies) == 1


async def test_streamed_arguments_give_partial_values_and_no_call_deltas() -> None:
    lookup = looker()
    whole = {"name": "Rex " * 50, "age": 3}
    with Fake("openai") as fake:
        fake.script(
            OpenAIReply(tool_calls=[("lookup", {"breed": "collie"})], tool_call_framing="split"),
            OpenAIReply(tool_calls=[("final_result", whole)], tool_call_framing="split"),
        )
        async with fake.client(tools=[lookup], output_strategy="tool") as client:
            events = await events_of(client.chat("Invent a dog.", output=P))
        _, body = fake.bodies
    texts = [e for e in events if isinstance(e, ollm.TextEvent)]
    partials = [i for i, e in enumerate(events) if isinstance(e, ollm.PartialOutputEvent)]
    (output,) = [i for i, e in enumerate(events) if isinstance(e, ollm.OutputEvent)]
    assert len(texts) > 1  # the arguments as they were written
    assert partials
    assert max(partials) < output
    assert events[output] == ollm.OutputEvent(P("Rex " * 50, 3))
    # The caller did not ask for call deltas: none is shown, not even the output tool's.
    assert not any(isinstance(e, ollm.ToolCallDeltaEvent) for e in events)
    assert body["stream"] is True


async def test_each_turn_is_judged_by_its_own_call(local: Fake) -> None:
    # A correction answered in prose is prose, not the call of the turn before.
    local.script(local.call("final_result", {"name": "Rex", "age": "three"}), local.text("A dog."))
    async with local.client(output_strategy="tool", output_retries=1) as client:
        with pytest.raises(ollm.OutputInvalidError) as raised:
            await client.run("Invent a dog.", output=P)
    assert raised.value.errors == (PROSE,)
    assert raised.value.raw == "A dog."


async def test_a_caller_who_asked_for_deltas_sees_the_other_calls_only() -> None:
    lookup = looker()
    with Fake("openai") as fake:
        fake.script(
            OpenAIReply(tool_calls=[("lookup", {"breed": "collie"})], tool_call_framing="split"),
            OpenAIReply(tool_calls=[("final_result", DOG)], tool_call_framing="split"),
        )
        async with fake.client(
            tools=[lookup], output_strategy="tool", tool_call_deltas=True
        ) as client:
            events = await events_of(client.chat("A collie.", output=P))
    deltas = [e for e in events if isinstance(e, ollm.ToolCallDeltaEvent)]
    assert deltas
    assert {e.name for e in deltas if e.name} == {"lookup"}
    assert [e.value for e in events if isinstance(e, ollm.OutputEvent)] == [P("Rex", 3)]


def with_react() -> ollm.Registries:
    """Registries with ollm-react's plugin (``prompted``, ``react``), and no other."""
    return ollm.discover(plugins=[ollm_react.plugin], entry_points=[])


async def test_a_model_without_tools_is_asked_as_auto_asks_with_a_notice() -> None:
    with Fake("ollama") as fake:
        fake.server.add_model("gemma2", ["completion"])
        fake.script(
            fake.text("Rex is a good dog."),
            fake.text('{"name": "Rex", "age": 3}'),
            fake.text('{"name": "Ace", "age": 5}'),
        )
        async with ollm.ChatClient(
            with_react(), provider=fake.provider(), model="gemma2", output_strategy="tool"
        ) as client:
            events = await events_of(client.chat("Invent a dog.", output=P))
            again = await events_of(client.chat("Another.", output=P))
        bodies = fake.bodies
    switches = [e for e in events if isinstance(e, ollm.NoticeEvent) and e.kind in SWITCHES]
    first, ignored = switches
    # The constraint needs no tools: auto's native one first (Ollama's format)...
    assert first.kind == "output_strategy"
    assert first.message.startswith("gemma2 cannot call tools natively: the tool output")
    assert "(native)" in first.message
    # ...and, as with auto, prompted once the server ignored it (at no retry's cost).
    assert ignored.kind == "format_ignored"
    assert [e.value for e in events if isinstance(e, ollm.OutputEvent)] == [P("Rex", 3)]
    assert [e.value for e in again if isinstance(e, ollm.OutputEvent)] == [P("Ace", 5)]
    assert len(bodies) == 3
    assert [fake.constraint(body) is not None for body in bodies] == [True, False, False]
    for body in bodies:
        assert not body.get("tools")
        assert "JSON Schema" in fake.system(body)


async def test_a_model_that_refuses_tools_is_asked_in_the_prompt_from_then_on() -> None:
    refusal = ollm.ErrorEvent("gemma2 does not support tools", "TOOLS_UNSUPPORTED")
    provider = ScriptedProvider(
        Reply(error=refusal), '{"name": "Rex", "age": 3}', '{"name": "Ace", "age": 5}'
    )
    async with ollm.ChatClient(with_react(), provider=provider, output_strategy="tool") as client:
        events = await events_of(client.chat("Invent a dog.", output=P))
        again = await events_of(client.chat("Another.", output=P))
    notices = [e for e in events + again if isinstance(e, ollm.NoticeEvent)]
    assert [n.kind for n in notices] == ["output_strategy", "output_strategy"]
    assert "does not support tools" in notices[0].message
    assert [e.value for e in events if isinstance(e, ollm.OutputEvent)] == [P("Rex", 3)]
    assert [e.value for e in again if isinstance(e, ollm.OutputEvent)] == [P("Ace", 5)]
    assert not any(isinstance(e, ollm.ErrorEvent) for e in events + again)
    first, second, third = provider.requests
    assert [t.name for t in first.tools] == ["final_result"]
    assert second.tools == ()
    assert third.tools == ()  # the next chat asks for no tool either
    assert second.response_format is not None  # auto's native constraint
    assert third.response_format is not None


async def test_a_refusal_of_the_chats_own_tools_is_not_sent_again() -> None:
    # Named native, the chat's tools would be refused again: no retry, the error.
    refusal = ollm.ErrorEvent("mock-model does not support tools", "TOOLS_UNSUPPORTED")
    provider = ScriptedProvider(Reply(error=refusal), '{"name": "Rex", "age": 3}')
    async with ollm.ChatClient(
        with_react(),
        provider=provider,
        tools=[looker()],
        tool_strategy="native",
        output_strategy="tool",
    ) as client:
        events = await events_of(client.chat("Invent a dog.", output=P))
    assert [e.code for e in events if isinstance(e, ollm.ErrorEvent)] == ["TOOLS_UNSUPPORTED"]
    assert len(provider.requests) == 1


async def test_a_text_protocol_tool_strategy_gets_the_prompted_strategy_with_a_notice() -> None:
    lookup = looker()
    provider = ScriptedProvider('Thought: I know.\nFinal Answer: {"name": "Rex", "age": 3}')
    async with ollm.ChatClient(
        with_react(),
        provider=provider,
        tools=[lookup],
        tool_strategy="react",
        output_strategy="tool",
    ) as client:
        events = await events_of(client.chat("Invent a dog.", output=P))
    (notice,) = [e for e in events if isinstance(e, ollm.NoticeEvent)]
    assert "react tool strategy" in notice.message
    assert [e.value for e in events if isinstance(e, ollm.OutputEvent)] == [P("Rex", 3)]
    (request,) = provider.requests
    assert request.tools == ()  # ReAct renders its tools as text; no final_result


async def test_an_unknown_output_strategy_is_an_error_naming_those_there_are() -> None:
    provider = ScriptedProvider("{}")
    async with ollm.ChatClient(with_react(), provider=provider, output_strategy="tools") as client:
        events = await events_of(client.chat("Invent a dog.", output=P))
    (error,) = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "PLUGIN_ERROR"
    assert "'tools' is not installed" in error.message
    assert "Available: auto, native, tool, prompted." in error.message
    assert provider.requests == []
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "error"


async def test_a_pydantic_model_through_the_tool_is_validated_by_pydantic(fake: Fake) -> None:
    fake.script(
        fake.call("final_result", {"name": "rex", "age": 3}),
        fake.call("final_result", {"name": "Rex", "age": 3}),
    )
    async with fake.client(output_strategy="tool") as client:
        value = await client.run("Invent a dog.", output=Dog)
    assert value == Dog(name="Rex", age=3)
    first, second = fake.bodies
    parameters = tools_offered(fake, first)["final_result"]
    assert set(parameters["properties"]) == {"name", "age"}
    correction = fake.last_user_text(second)
    assert "$.name: value error, the name must start with a capital letter" in correction
    assert "Call final_result again" in correction


async def test_a_thinking_model_is_offered_the_tool_unforced() -> None:
    # The Messages API refuses a forced tool while the model thinks: the prompt asks.
    with Fake("anthropic") as fake:
        fake.script(fake.call("final_result", DOG))
        async with fake.client(output_strategy="tool", think="low") as client:
            assert await client.run("Invent a dog.", output=P) == P("Rex", 3)
        (body,) = fake.bodies
    assert list(tools_offered(fake, body)) == ["final_result"]
    assert "tool_choice" not in body
    assert body["thinking"]["type"] == "enabled"
    assert "final_result" in fake.system(body)


@pytest.mark.parametrize(
    ("output", "written", "value"),
    [
        (
            P,
            '<tool_call>\n{"name": "final_result", "arguments": {"name": "Rex", "age": 3}}\n'
            "</tool_call>",
            P("Rex", 3),
        ),
        (list[int], '{"name": "final_result", "parameters": {"value": [1, 2]}}', [1, 2]),
    ],
)
async def test_a_call_of_the_output_tool_written_as_text_gives_its_value(
    output: Any, written: str, value: Any
) -> None:
    # A model whose server does not parse calls (a local model's template) writes it out.
    provider = ScriptedProvider(written)
    async with ollm.ChatClient(
        ollm.Registries(), provider=provider, output_strategy="tool", output_retries=0
    ) as client:
        assert await client.run("Give it.", output=output) == value
