"""Typed output (``run(prompt, output=T)``, ``chat(..., output=T)``) on the fake Ollama,
OpenAI-compatible and Gemini servers, on asyncio and trio, through the public API: the
native constraint and the schema in the prompt, corrections, a server that ignores the
constraint, retries that run out, partial values, and tools before the value."""

from __future__ import annotations

import itertools
import json

import msgspec
import pytest
from typed_fakes import Fake, P

import ollm

pytestmark = pytest.mark.anyio


async def events_of(stream: ollm.ChatStream) -> list[ollm.ChatEvent]:
    async with stream:
        return [event async for event in stream]


async def test_a_wrong_field_is_corrected_once_naming_its_path_and_type(fake: Fake) -> None:
    fake.script(fake.text('{"name":"x","age":"ten"}'), fake.text('{"name":"x","age":10}'))
    async with fake.client() as client:
        value = await client.run("Invent a dog.", output=P)
    assert value == P(name="x", age=10)
    bodies = fake.bodies
    assert len(bodies) == 2
    correction = fake.last_user_text(bodies[1])
    assert "$.age" in correction
    assert "int" in correction


async def test_the_request_carries_the_native_constraint_and_the_prompt_the_schema(
    fake: Fake,
) -> None:
    fake.script(fake.text('{"name":"x","age":1}'))
    async with fake.client(system="Be brief.") as client:
        await client.run("Invent a dog.", output=P)
    (body,) = fake.bodies
    constraint = fake.constraint(body)
    if fake.name == "ollama":
        assert constraint["properties"]["age"] == {"type": "integer"}
    elif fake.name == "openai":
        assert constraint["type"] == "json_schema"
        assert constraint["json_schema"]["schema"]["properties"]["age"] == {"type": "integer"}
    else:
        assert constraint["properties"]["age"]["type"].lower() == "integer"
    system = fake.system(body)
    assert system.startswith("Be brief.")
    assert "JSON Schema" in system
    assert json.dumps(["name", "age"], separators=(",", ":")) in system


async def test_partial_values_stream_before_the_one_output_and_none_is_the_type(
    fake: Fake,
) -> None:
    whole = json.dumps({"name": "Rex " * 300, "age": 3})
    cuts = [len(whole) * i // 1000 for i in range(1001)]
    pieces = [whole[a:b] for a, b in itertools.pairwise(cuts)]
    assert len(pieces) == 1000
    assert all(pieces)
    fake.script(fake.text(pieces))
    async with fake.client() as client:
        events = await events_of(client.chat("Invent a dog.", output=P))
    outputs = [i for i, e in enumerate(events) if isinstance(e, ollm.OutputEvent)]
    partials = [i for i, e in enumerate(events) if isinstance(e, ollm.PartialOutputEvent)]
    assert len(outputs) == 1
    assert partials
    assert max(partials) < outputs[0]
    assert not any(isinstance(events[i].value, P) for i in partials)  # type: ignore[union-attr]
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "stop"
    assert events[outputs[0]] == ollm.OutputEvent(P(name="Rex " * 300, age=3))
    assert events[outputs[0] + 1] is events[-1]


async def test_a_server_that_ignores_the_constraint_is_asked_in_the_prompt_from_then_on(
    fake: Fake,
) -> None:
    fake.script(
        fake.text("Sure! Rex is a good dog, three years old."),
        fake.text('{"name":"Rex","age":"three"}'),
        fake.text('{"name":"Rex","age":3}'),
        fake.text('{"name":"Ace","age":5}'),
    )
    async with fake.client(output_retries=1) as client:
        events = await events_of(client.chat("Invent a dog.", output=P))
        again = await client.run("Another one.", output=P)
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent) and e.kind == "format_ignored"]
    assert len(notices) == 1
    # The prose cost no retry: the one retry went to the wrong age.
    assert [e.value for e in events if isinstance(e, ollm.OutputEvent)] == [P("Rex", 3)]
    assert again == P("Ace", 5)
    first, *later = fake.bodies
    assert len(later) == 3
    assert fake.constraint(first) is not None
    # No request since has the constraint, in this chat or the next one on the client.
    assert [fake.constraint(body) for body in later] == [None, None, None]
    assert "JSON Schema" in fake.system(later[-1])


async def test_three_invalid_replies_end_with_output_invalid_and_the_history_intact(
    fake: Fake,
) -> None:
    replies = ['{"name":"x","age":"one"}', '{"name":"x","age":"two"}', '{"name":"x"}']
    fake.script(*(fake.text(r) for r in replies), fake.text("Fine."))
    async with fake.client() as client:
        events = await events_of(client.chat("Invent a dog.", output=P))
        errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
        assert len(fake.bodies) == 3
        assert [e.code for e in errors] == ["OUTPUT_INVALID"]
        assert errors[0].raw == replies[2]
        assert errors[0].errors == ("$: object missing required field age",)
        assert "did not match the output type P (after 2 corrections)" in errors[0].message
        assert not any(isinstance(e, ollm.OutputEvent) for e in events)
        assert events[-1] == ollm.FinishEvent("error", events[-1].usage)  # type: ignore[union-attr]
        history = client.conversation.messages
        assert [m.role for m in history] == ["user", "assistant"] * 3
        assert [history[i].text for i in (1, 3, 5)] == replies
        # The conversation goes on.
        assert (await client.run("Thanks.")).text == "Fine."


async def test_run_raises_output_invalid_with_the_last_reply(fake: Fake) -> None:
    fake.script(fake.text("not json at all"), fake.text("[1, 2]"))
    async with fake.client(output_retries=0, output_strategy="native") as client:
        with pytest.raises(ollm.OutputInvalidError) as raised:
            await client.run("Invent a dog.", output=P)
    # Named "native" explicitly: the server's prose is judged as it is (no switch, no
    # free retry), and the one reply is the raw text.
    assert raised.value.code == "OUTPUT_INVALID"
    assert raised.value.raw == "not json at all"
    assert raised.value.errors
    assert raised.value.errors[0].startswith("$:")
    assert len(fake.bodies) == 1


async def test_a_tool_call_then_the_value_in_one_run(fake: Fake) -> None:
    looked: list[str] = []

    def lookup(breed: str) -> str:
        """Look a breed up."""
        looked.append(breed)
        return "lives 12 years"

    fake.script(fake.call("lookup", {"breed": "collie"}), fake.text('{"name":"Lass","age":12}'))
    async with fake.client(tools=[lookup]) as client:
        value = await client.run("A collie, please.", output=P)
    assert value == P("Lass", 12)
    assert looked == ["collie"]
    first, second = fake.bodies
    assert fake.constraint(first) is not None
    assert fake.constraint(second) is not None


class Pet(msgspec.Struct):
    name: str
    tags: list[str] = []


@pytest.mark.parametrize(("output", "strict"), [(P, True), (Pet, False)])
async def test_openai_gets_strict_structured_outputs_where_the_schema_allows(
    output: type, strict: bool
) -> None:
    with Fake("openai") as fake:
        fake.script(fake.text('{"name":"x","age":1,"tags":[]}'))
        async with fake.client() as client:
            await client.run("Invent one.", output=output)
        (body,) = fake.bodies
    spec = fake.constraint(body)["json_schema"]
    assert spec["name"] == output.__name__
    if strict:
        # Strict mode: every object closed, every field required.
        assert spec["strict"] is True
        assert spec["schema"]["additionalProperties"] is False
        assert spec["schema"]["required"] == ["name", "age"]
    else:
        # An optional field (with a default) cannot be strict: the schema goes as it is.
        assert "strict" not in spec
        assert "additionalProperties" not in spec["schema"]


async def test_gemini_gets_the_schema_in_its_own_subset() -> None:
    with Fake("gemini") as fake:
        fake.script(fake.text('[{"name":"x","age":1}]'))
        async with fake.client() as client:
            value = await client.run("Invent two.", output=list[P])
        (body,) = fake.bodies
    assert value == [P("x", 1)]
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    schema = config["responseSchema"]
    assert schema["type"].lower() == "array"
    assert schema["items"]["properties"]["age"]["type"].lower() == "integer"


async def test_a_chat_that_reaches_its_turn_limit_calling_tools_has_no_value(fake: Fake) -> None:
    def lookup(breed: str) -> str:
        """Look a breed up."""
        return "lives 12 years"

    fake.script(fake.call("lookup", {"breed": "collie"}))
    async with fake.client(tools=[lookup], max_turns=1) as client:
        events = await events_of(client.chat("A collie, please.", output=P))
        assert not any(isinstance(e, ollm.OutputEvent) for e in events)
        assert events[-1] == ollm.FinishEvent("max_turns", events[-1].usage)  # type: ignore[union-attr]
        fake.script(fake.call("lookup", {"breed": "collie"}))
        with pytest.raises(ollm.OutputInvalidError) as raised:
            await client.run("Again.", output=P)
    assert "max_turns" in raised.value.message


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_blocking_client_returns_the_value_too(backend: str) -> None:
    with Fake("ollama") as fake:
        fake.script(
            fake.text('{"name":"x","age":"ten"}'),
            fake.text('{"name":"x","age":10}'),
            fake.text('{"name":"y","age":2}'),
        )
        with ollm.SyncChatClient(fake.client(), backend=backend) as client:
            assert client.run("Invent a dog.", output=P) == P("x", 10)
            events = list(client.chat("Another.", output=P))
    assert events[-2] == ollm.OutputEvent(P("y", 2))
