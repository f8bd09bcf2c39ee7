"""The ``json-react`` strategy (issue 44): each step a JSON object whose schema the
backend keeps to. The request bodies are pinned on the fake Ollama server (``format``)
and the fake OpenAI-compatible server (``response_format`` json_schema), on asyncio and
trio: the tools leave the request, the step schema goes in, the call runs, and the step
that answers reads the tool's result beside the question."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typed_fakes import Fake

import ollm
from ollm_react import JsonReActStrategy, step_schema

pytestmark = pytest.mark.anyio


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: For example "2 * 3".
    """
    return {"17 * 23": "391"}.get(expression, "unknown")


def weather(city: str) -> str:
    """The weather of a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


TOOLS = [ollm.Tool.from_function(calculate), ollm.Tool.from_function(weather)]


def step(thought: str, **action: Any) -> str:
    return json.dumps({"thought": thought, "action": action})


CALL = step("I need calculate.", tool="calculate", arguments={"expression": "17 * 23"})
ANSWER = step("The result is there.", final_answer="17 * 23 is 391.")


@pytest.fixture(params=["ollama", "openai"])
def fake(request: pytest.FixtureRequest) -> Iterator[Fake]:
    with Fake(str(request.param)) as made:
        yield made


def registries() -> ollm.Registries:
    made = ollm.Registries()
    made.strategies.register(ollm.StrategySpec("json-react", JsonReActStrategy))
    return made


def schema_of(fake: Fake, body: dict[str, Any]) -> dict[str, Any]:
    constraint = fake.constraint(body)
    if fake.name == "openai":
        assert constraint["type"] == "json_schema"
        schema: dict[str, Any] = constraint["json_schema"]["schema"]
        return schema
    assert isinstance(constraint, dict)
    return constraint


async def test_a_call_runs_and_the_answer_reads_its_result(fake: Fake) -> None:
    fake.script(fake.text(CALL), fake.text([ANSWER[:20], ANSWER[20:]]))
    async with (
        fake.client(registries=registries(), tools=TOOLS, tool_strategy="json-react") as client,
        client.chat("What is 17 * 23?") as stream,
    ):
        events = [event async for event in stream]

    text = "".join(e.text for e in events if isinstance(e, ollm.TextEvent))
    assert text == "17 * 23 is 391."
    assert events[-1].reason == "stop"  # type: ignore[union-attr]
    (started,) = [e for e in events if isinstance(e, ollm.ToolCallStartEvent)]
    assert started.call == ollm.ToolCall("json_react_1", "calculate", {"expression": "17 * 23"})
    (result,) = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert result.result == "391"

    first, second = fake.bodies
    for body in (first, second):
        # No native tools: the step schema is the constraint.
        assert "tools" not in body or not body["tools"]
        schema = schema_of(fake, body)
        expected = step_schema(tuple(t.schema for t in TOOLS))
        if fake.name == "openai":
            # Strict Structured Outputs: every object closed, as the provider makes it.
            assert body["response_format"]["json_schema"]["strict"] is True
            expected["properties"]["action"]["anyOf"][0]["properties"]["arguments"][
                "additionalProperties"
            ] = False
            expected["properties"]["action"]["anyOf"][1]["properties"]["arguments"][
                "additionalProperties"
            ] = False
        assert schema == expected
        assert "calculate: Evaluate an arithmetic expression." in fake.system(body)
    # The answering step reads the result beside the question.
    last = fake.last_user_text(second)
    assert last.startswith("Result of calculate: 391\nThe question was: What is 17 * 23?")
    # The call is in the history as the JSON step the model wrote.
    assistant = [m for m in second["messages"] if m["role"] == "assistant"]
    assert json.loads(assistant[-1]["content"]) == json.loads(CALL)
    # ollm's canonical history: a native call, its result, the answer.
    history = client.conversation.messages
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[-1] == ollm.Message.assistant("17 * 23 is 391.", thinking="The result is there.")


def test_the_step_schema_allows_a_call_of_each_tool_or_an_answer() -> None:
    schemas = tuple(t.schema for t in TOOLS)
    schema = step_schema(schemas)
    assert schema["required"] == ["thought", "action"]
    branches = schema["properties"]["action"]["anyOf"]
    assert [b["properties"].get("tool", {}).get("const") for b in branches] == [
        "calculate",
        "weather",
        None,
    ]
    assert branches[0]["properties"]["arguments"]["properties"] == {
        "expression": {"type": "string", "description": 'For example "2 * 3".'}
    }
    assert branches[-1]["required"] == ["final_answer"]
    # A required tool: the first step cannot answer; a named one: only it.
    assert len(step_schema(schemas, answer=False)["properties"]["action"]["anyOf"]) == 2
    only = step_schema(schemas, answer=False, only="weather")["properties"]["action"]
    assert only["properties"]["tool"] == {"const": "weather"}


async def test_tool_choice_required_leaves_the_answer_out_of_the_first_step(fake: Fake) -> None:
    fake.script(fake.text(CALL), fake.text(ANSWER))
    async with fake.client(
        registries=registries(), tools=TOOLS, tool_strategy="json-react", tool_choice="required"
    ) as client:
        await client.run("What is 17 * 23?")
    first, second = fake.bodies
    assert "anyOf" in schema_of(fake, first)["properties"]["action"]
    assert all(
        "tool" in branch["properties"]
        for branch in schema_of(fake, first)["properties"]["action"]["anyOf"]
    )
    finals = schema_of(fake, second)["properties"]["action"]["anyOf"]
    assert "final_answer" in finals[-1]["properties"]


@pytest.mark.parametrize(
    "placeholder",
    ["<your answer for the user>", "the answer itself, written out for the user"],
)
async def test_a_step_the_backend_did_not_constrain_gets_a_correction(
    fake: Fake, placeholder: str
) -> None:
    fake.script(
        fake.text("Sure, 391."),
        fake.text(step("Placeholder.", final_answer=placeholder)),
        fake.text(ANSWER),
    )
    async with fake.client(
        registries=registries(), tools=TOOLS, tool_strategy="json-react"
    ) as client:
        answer = await client.run("What is 17 * 23?")
    assert answer.text == "17 * 23 is 391."
    _, second, third = fake.bodies
    assert fake.last_user_text(second).startswith(
        "Your reply could not be used: it was not one whole JSON object."
    )
    assert "placeholder" in fake.last_user_text(third)


async def test_three_bad_steps_end_with_a_format_error_and_the_history_intact(fake: Fake) -> None:
    fake.script(*(fake.text("no json here") for _ in range(3)))
    async with (
        fake.client(registries=registries(), tools=TOOLS, tool_strategy="json-react") as client,
        client.chat("What is 17 * 23?") as stream,
    ):
        events = [event async for event in stream]
    (error,) = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "FORMAT_ERROR"
    assert "json-react" in error.message
    assert events[-1].reason == "error"  # type: ignore[union-attr]
    assert client.conversation.messages[0] == ollm.Message.user("What is 17 * 23?")


class Holding:
    """A provider that, like one in the process, holds its model until its stream is
    closed: each request records how many earlier streams were still open."""

    name = "holding"

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.open = 0
        self.open_at_start: list[int] = []

    async def chat_stream(self, request: ollm.ProviderRequest) -> Any:
        self.open_at_start.append(self.open)
        self.open += 1
        try:
            yield ollm.TextEvent(self.replies.pop(0))
            yield ollm.FinishEvent("stop")
        finally:
            self.open -= 1


async def test_each_steps_stream_is_closed_before_the_next_request() -> None:
    provider = Holding(CALL, ANSWER)
    client = ollm.ChatClient(
        registries(), provider=provider, model="m", tools=TOOLS, tool_strategy="json-react"
    )
    result = await client.run("What is 17 * 23?")
    assert result.text == "17 * 23 is 391."
    assert provider.open_at_start == [0, 0]
    assert provider.open == 0


async def test_a_call_repeated_with_the_same_arguments_is_not_run_and_the_next_step_answers(
    fake: Fake,
) -> None:
    """At temperature 0 a small model repeats a failing call until the turn limit: the
    repeat gets the first one's result instead of running, and the step after it may
    only answer."""
    wrong = step("calculate", tool="calculate", arguments={"expression": "17 * 23 ="})
    fake.script(fake.text(wrong), fake.text(wrong), fake.text(ANSWER))
    ran: list[str] = []

    def counting(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: For example "2 * 3".
        """
        ran.append(expression)
        return "error: not an expression"

    tool = ollm.Tool.from_function(counting).renamed("calculate")
    async with (
        fake.client(registries=registries(), tools=[tool], tool_strategy="json-react") as client,
        client.chat("What is 17 * 23?") as stream,
    ):
        events = [event async for event in stream]

    assert ran == ["17 * 23 ="]  # once, not twice
    results = [e.result for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert len(results) == 2
    assert results[1].startswith(
        "Tool 'calculate' was not run: it was already called with these same arguments"
    )
    assert "error: not an expression" in results[1]
    assert events[-1].reason == "stop"  # type: ignore[union-attr]
    _, second, third = fake.bodies
    # Only the step after the repeat is kept to an answer.
    assert "anyOf" in schema_of(fake, second)["properties"]["action"]
    answer_only = schema_of(fake, third)["properties"]["action"]
    assert answer_only["required"] == ["final_answer"]
    assert [m.role for m in client.conversation.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
