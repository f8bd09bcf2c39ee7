"""Typed output through ReAct (``ollm-react``'s ``prompted`` output strategy, from its
``ollm_output_strategies`` hook), on the fake Ollama, OpenAI-compatible and Gemini
servers, asyncio and trio: the schema in the prompt and no constraint, a tool call then
the value as the Final Answer, a correction, and the fallback when ``prompted`` is not
installed."""

from __future__ import annotations

import pytest
from typed_fakes import Fake, P

import ollm
import ollm_react.plugin

pytestmark = pytest.mark.anyio

ACTION = 'Thought: I should look it up.\nAction: lookup\nAction Input: {"breed": "collie"}'


def with_react() -> ollm.Registries:
    """Registries with ollm-react's plugin, and no other."""
    return ollm.discover(plugins=[ollm_react.plugin], entry_points=[])


def lookup(breed: str) -> str:
    """Look a breed up."""
    return f"a {breed} lives 12 years"


async def test_a_react_tool_call_then_the_value_as_final_answer(fake: Fake) -> None:
    fake.script(
        fake.text(ACTION),
        fake.text('Thought: I know.\nFinal Answer: {"name": "Lass", "age": 12}'),
    )
    async with (
        fake.client(registries=with_react(), tools=[lookup], tool_strategy="react") as client,
        client.chat("A collie, please.", output=P) as stream,
    ):
        events = [event async for event in stream]
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.result for r in results] == ["a collie lives 12 years"]
    outputs = [e for e in events if isinstance(e, ollm.OutputEvent)]
    assert outputs == [ollm.OutputEvent(P("Lass", 12))]
    first, second = fake.bodies
    for body in (first, second):
        assert fake.constraint(body) is None
        system = fake.system(body)
        # The prompted strategy's words: the value is the Final Answer.
        assert "after any tool calls" in system
        assert '"required":["name","age"]' in system


async def test_a_react_final_answer_that_does_not_validate_is_corrected(fake: Fake) -> None:
    fake.script(
        fake.text('Final Answer: {"name": "Lass", "age": "twelve"}'),
        fake.text('Final Answer: ```json\n{"name": "Lass", "age": 12}\n```'),
    )
    async with fake.client(
        registries=with_react(), tools=[lookup], tool_strategy="react"
    ) as client:
        value = await client.run("A collie, please.", output=P)
    assert value == P("Lass", 12)
    correction = fake.last_user_text(fake.bodies[1])
    assert "$.age" in correction
    assert "int" in correction


async def test_prompted_output_is_asked_for_when_a_server_ignored_the_constraint(
    fake: Fake,
) -> None:
    fake.script(fake.text("Lass, a collie of twelve."), fake.text('{"name":"Lass","age":12}'))
    async with fake.client(registries=with_react()) as client:
        value = await client.run("A collie, please.", output=P)
    assert value == P("Lass", 12)
    first, second = fake.bodies
    assert fake.constraint(first) is not None
    assert fake.constraint(second) is None
    # ollm-react's wording: the prompted strategy, not the native one without its
    # constraint.
    assert "after any tool calls" in fake.system(second)
    assert "after any tool calls" not in fake.system(first)
