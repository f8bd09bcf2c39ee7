"""ReActStrategy on its own: the names it answers to, its review of a reply (one it did
not stream, counts of malformed replies in a row, repeated calls), its system prompt as
tools, system and options change, the last reply at the turn limit, and the edges of its
stream (no finish, a provider's iterator that is not a generator, thinking from two
sources)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import ollm
from ollm_react import (
    ReActStrategy,
    build_instructions,
    wrap_up_prompt,
)
from ollm_react.plugin import ollm_tool_strategies
from ollm_testutils import FunctionProvider, Reply, ScriptedProvider

from .conftest import asking

ACTION = 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}'
ANSWER = "Thought: I have it.\nFinal Answer: It is sunny in Paris."
MISSING_INPUT = "Action: search"
THOUGHT = "Thought: Paris is in France."
FALLBACK = "I could not finish within the turn limit."


def texts(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, ollm.TextEvent))


# -- the strategy's names ----------------------------------------------------------------


def test_each_strategy_answers_to_its_registry_name() -> None:
    assert ReActStrategy().name == "react"
    made = {spec.name: spec.factory() for spec in ollm_tool_strategies()}
    assert {name: strategy.name for name, strategy in made.items()} == {
        "recover": "recover",
        "react": "react",
        "react-example": "react-example",
        "json-react": "json-react",
    }


# -- the review on its own ---------------------------------------------------------------


def review(strategy: ReActStrategy, text: str) -> ollm.ReplyReview:
    result = strategy.review(ollm.Message.assistant(text))
    assert result is not None
    return result


def test_a_reply_the_strategy_did_not_stream_is_judged_by_its_own_text(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    strategy = ReActStrategy()
    strategy.prepare(asking(schemas))  # the tools, without a stream
    assert review(strategy, ACTION) == ollm.ReplyReview(
        message=ollm.Message.assistant(
            "",
            tool_calls=(ollm.ToolCall("react_1", "get_weather", {"city": "Paris"}),),
            thinking="I need the weather.",
        )
    )
    # The next reply is read afresh, not from the last one's text.
    assert review(strategy, ANSWER) == ollm.ReplyReview(
        message=ollm.Message.assistant("It is sunny in Paris.", thinking="I have it.")
    )


def test_a_strategy_that_saw_no_tools_knows_none() -> None:
    result = review(ReActStrategy(), 'Action: search\nAction Input: {"query": "x"}')
    assert result.feedback is not None
    assert result.feedback.startswith(
        "Observation: Error: there is no tool named 'search'. The tools are: (none)."
    )


def outcome(result: ollm.ReplyReview) -> str:
    if result.error is not None:
        return "error"
    if result.feedback is not None:
        return "feedback"
    assert result.message is not None
    return "call" if result.message.tool_calls else "answer"


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(
            [
                (MISSING_INPUT, "feedback"),
                (MISSING_INPUT, "feedback"),
                (ANSWER, "answer"),
                (MISSING_INPUT, "feedback"),
                (MISSING_INPUT, "feedback"),
                (MISSING_INPUT, "error"),
            ],
            id="an answer ends the row",
        ),
        pytest.param(
            [
                (THOUGHT, "feedback"),
                (THOUGHT, "answer"),
                (THOUGHT, "feedback"),
                (MISSING_INPUT, "feedback"),
                (MISSING_INPUT, "error"),
            ],
            id="a thought taken as the answer ends the row",
        ),
        pytest.param(
            [(MISSING_INPUT, "feedback"), (THOUGHT, "feedback"), (THOUGHT, "answer")],
            id="only two thought-only replies in a row make an answer",
        ),
    ],
)
def test_malformed_replies_are_counted_in_a_row(
    steps: list[tuple[str, str]], schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    strategy = ReActStrategy()  # three malformed replies in a row end the chat
    strategy.prepare(asking(schemas))
    assert [outcome(review(strategy, text)) for text, _ in steps] == [
        expected for _, expected in steps
    ]


def test_too_many_malformed_replies_word_for_word(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    strategy = ReActStrategy(max_format_errors=1)
    strategy.prepare(asking(schemas))
    assert review(strategy, MISSING_INPUT) == ollm.ReplyReview(
        message=ollm.Message.assistant(MISSING_INPUT),
        error=ollm.ErrorEvent(
            "The model's last 1 replies were not in the ReAct format (the last one: the "
            "Action had no Action Input line after it). Try a larger model, the "
            "'react-example' tool strategy (instructions with a worked example: "
            "tool_strategy=, or ollm chat --tool-strategy react-example), or chat "
            "without tools.",
            "FORMAT_ERROR",
        ),
    )


def test_a_call_made_twice_is_refused_in_these_words(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    strategy = ReActStrategy()
    strategy.prepare(asking(schemas))
    for _ in range(2):
        assert review(strategy, ACTION).results == {}
    call = ollm.ToolCall("react_1", "get_weather", {"city": "Paris"})
    # No result in any history the strategy saw: it says so.
    assert review(strategy, ACTION) == ollm.ReplyReview(
        message=ollm.Message.assistant("", tool_calls=(call,), thinking="I need the weather."),
        results={
            "react_1": 'it was already called 2 times with these same arguments ({"city": '
            '"Paris"}). Its result was: not known. Use that result, call a tool with other '
            "arguments, or give your Final Answer."
        },
    )


def weather(args: str) -> str:
    return f"Action: get_weather\nAction Input: {args}"


@pytest.mark.parametrize(
    ("replies", "refused"),
    [
        pytest.param(
            [weather('{"city": "Paris"}'), weather('{"city": "Oslo"}')] * 2
            + ['Action: search\nAction Input: {"query": "Paris"}'] * 2,
            [False] * 6,
            id="other arguments or another tool are another call",
        ),
        pytest.param(
            [
                weather('{"city": "Paris", "units": "celsius"}'),
                weather('{"units": "celsius", "city": "Paris"}'),
                weather('{"city": "Paris", "units": "celsius"}'),
            ],
            [False, False, True],
            id="the order of the arguments does not matter",
        ),
    ],
)
def test_calls_are_counted_by_tool_and_arguments(
    replies: list[str], refused: list[bool], schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    strategy = ReActStrategy()
    strategy.prepare(asking(schemas))
    assert [bool(review(strategy, reply).results) for reply in replies] == refused


# -- the request -------------------------------------------------------------------------


def test_the_text_request_asks_for_no_tool_and_keeps_a_system_prompt_alone(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    # The provider gets no tools, so no tool choice either.
    assert ReActStrategy().text_request(asking(schemas, tool_choice="required")).tool_choice == (
        "auto"
    )
    bare = ReActStrategy().text_request(asking((), system_prompt="Be brief."))
    assert bare.system_prompt == "Be brief."


def test_the_system_prompt_follows_every_change(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    strategy = ReActStrategy()
    fewer = schemas[:1]
    steps: list[tuple[tuple[ollm.ToolSchema, ...], str | None, str, bool]] = [
        (schemas, None, "auto", False),
        (schemas, None, "auto", False),
        (schemas, "Be brief.", "auto", False),
        (schemas, "Be brief.", "required", False),
        (schemas, "required", "required", False),  # a system prompt that reads like a choice
        (fewer, "required", "required", False),
        (fewer, "required", "required", True),
    ]
    for tools, system, choice, example in steps:
        strategy.worked_example = example
        sent = strategy.text_request(asking(tools, system_prompt=system, tool_choice=choice))
        instructions = build_instructions(tools, worked_example=example, tool_choice=choice)
        assert sent.system_prompt == (f"{instructions}\n\n{system}" if system else instructions)


def test_the_wrap_up_request_has_no_tools_and_keeps_the_instructions(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    strategy = ReActStrategy()
    last = strategy.wrap_up(asking(schemas))
    assert last is not None
    assert last.tools == ()
    assert last.messages == (ollm.Message.user("question"), ollm.Message.user(wrap_up_prompt()))
    assert strategy.text_request(last).system_prompt == build_instructions(schemas)


# -- the stream and the last reply -------------------------------------------------------


@pytest.mark.anyio
async def test_the_last_answer_keeps_its_thought(
    schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    strategy = ReActStrategy()
    last = strategy.wrap_up(asking(schemas))
    assert last is not None
    provider = ScriptedProvider(Reply("Thought: enough.\nFinal Answer: done."))
    assert texts(await collect(strategy.stream(provider, last))) == "done."
    assert strategy.review(ollm.Message.assistant("done.")) == ollm.ReplyReview(
        message=ollm.Message.assistant("done.", thinking="enough.")
    )


@pytest.mark.parametrize(
    ("last_reply", "shown"),
    [
        (
            'Thought: I would search more.\nAction: search\nAction Input: {"query": "b"}',
            "I would search more.",
        ),
        ('Action: search\nAction Input: {"query": "b"}', FALLBACK),
        ("Owls hoot at night.", "Owls hoot at night."),
        # Protocol with no thought is never the answer: a call written as JSON (valid or
        # not), numbered markers, a fence, an empty Thought.
        ('{"action": "search", "action_input": {"query": "b"}}', FALLBACK),
        ('{"action": "search", "action_input": {"query": 3}}', FALLBACK),
        ("Action 1: lookup\nAction Input 1: {}", FALLBACK),
        ("```\nAction: lookup", FALLBACK),
        ("Thought:\nAction: search", FALLBACK),
    ],
)
@pytest.mark.anyio
async def test_the_last_reply_at_the_turn_limit_shows_an_answer_once(
    last_reply: str,
    shown: str,
    registries: ollm.Registries,
    tools: list[ollm.Tool],
    calls: Any,
    collect: Any,
) -> None:
    provider = ScriptedProvider(
        Reply('Action: search\nAction Input: {"query": "a"}'), Reply(last_reply)
    )
    chat = ollm.ChatClient(
        registries, provider=provider, tools=tools, tool_strategy="react", max_turns=1
    )
    events = await collect(chat.chat("What is ollm?"))
    assert calls.calls == [("search", {"query": "a"})]
    assert len([e for e in events if isinstance(e, ollm.ToolCallStartEvent)]) == 1
    assert texts(events) == shown
    assert chat.conversation.messages[-1] == ollm.Message.assistant(shown)
    assert events[-1].reason == "max_turns"


@pytest.mark.anyio
async def test_a_stream_that_ends_without_a_finish_still_completes_the_reply(
    schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    async def model(request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        yield ollm.TextEvent("Action: search\nAction Input: what is")
        yield ollm.TextEvent(" ollm")

    events = await collect(ReActStrategy().stream(FunctionProvider(model), asking(schemas)))
    assert events == [
        ollm.ToolCallEvent(ollm.ToolCall("react_1", "search", {"query": "what is ollm"}))
    ]


class Events:
    """A provider's stream that is a plain async iterator, not a generator."""

    def __init__(self, *events: ollm.ProviderEvent) -> None:
        self.events = list(events)

    def __aiter__(self) -> Events:
        return self

    async def __anext__(self) -> ollm.ProviderEvent:
        if not self.events:
            raise StopAsyncIteration
        return self.events.pop(0)


class ClosableEvents(Events):
    """One that counts how often it is closed."""

    closes = 0

    async def aclose(self) -> None:
        self.closes += 1


class OneStream:
    """A provider that hands out one ready-made stream."""

    name = "one-stream"

    def __init__(self, stream: Events) -> None:
        self.stream = stream

    def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        return self.stream


@pytest.mark.parametrize("kind", [Events, ClosableEvents])
@pytest.mark.anyio
async def test_a_providers_own_iterator_is_closed_once_if_it_can_be(
    kind: type[Events], schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    # The call closes early: the stream is closed there, and not again on the way out.
    stream = kind(
        ollm.TextEvent('Action: search\nAction Input: {"query": "x"}'),
        ollm.TextEvent("\nObservation: invented"),
        ollm.FinishEvent("stop"),
    )
    events = await collect(ReActStrategy().stream(OneStream(stream), asking(schemas)))
    assert events == [
        ollm.ToolCallEvent(ollm.ToolCall("react_1", "search", {"query": "x"})),
        ollm.FinishEvent("stop"),
    ]
    if isinstance(stream, ClosableEvents):
        assert stream.closes == 1


@pytest.mark.parametrize(
    ("events", "thinking"),
    [
        pytest.param(
            [ollm.ThinkingEvent("server"), ollm.TextEvent("Thought: a\nFinal Answer: b")],
            ["server", "\na"],
            id="channel then a one-letter thought",
        ),
        pytest.param(
            [ollm.TextEvent("<think>a</think>"), ollm.ThinkingEvent("b")],
            ["a", "\nb"],
            id="a think block then the channel",
        ),
    ],
)
@pytest.mark.anyio
async def test_thinking_from_each_source_starts_on_its_own_line(
    events: list[ollm.ProviderEvent],
    thinking: list[str],
    schemas: tuple[ollm.ToolSchema, ...],
    collect: Any,
) -> None:
    async def model(request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        for event in events:
            yield event
        yield ollm.FinishEvent("stop")

    shown = await collect(ReActStrategy().stream(FunctionProvider(model), asking(schemas)))
    assert [e.text for e in shown if isinstance(e, ollm.ThinkingEvent)] == thinking
