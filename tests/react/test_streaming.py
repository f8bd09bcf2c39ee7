"""The strategy's stream: hold-back of partial markers, text as it comes, the early stop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import ollm
from ollm_react import ReActStrategy
from ollm_testutils import FunctionProvider, Reply, ScriptedProvider

from .conftest import asking

pytestmark = pytest.mark.anyio

REPLY = "Thought: Easy one.\nFinal Answer: The answer is 42.\n"


def texts(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, ollm.TextEvent))


def thinking(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, ollm.ThinkingEvent))


def splits(text: str) -> list[list[str]]:
    """The text cut once at every position, and cut into single characters."""
    cuts = [[text[:i], text[i:]] for i in range(1, len(text))]
    return [*cuts, list(text)]


@pytest.mark.parametrize("chunks", splits(REPLY))
async def test_no_partial_marker_ever_reaches_the_user(
    chunks: list[str], schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    provider = ScriptedProvider(Reply(chunks))
    events = await collect(ReActStrategy().stream(provider, asking(schemas)))
    assert texts(events) == "The answer is 42."
    assert thinking(events) == "Easy one."
    for event in events:
        if isinstance(event, ollm.TextEvent):
            assert event.text
            assert "Final" not in event.text
            assert ":" not in event.text
    assert isinstance(events[-1], ollm.FinishEvent)


async def test_the_final_answer_streams_while_it_is_generated(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    log: list[str] = []

    async def model(request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        for chunk in ("Thought: ok\nFinal", " Answer: Forty", " two", " is it."):
            log.append(f"model: {chunk!r}")
            yield ollm.TextEvent(chunk)
        log.append("model: finish")
        yield ollm.FinishEvent("stop")

    stream = ReActStrategy().stream(FunctionProvider(model), asking(schemas))
    async for event in stream:
        if isinstance(event, ollm.TextEvent):
            log.append(f"user: {event.text!r}")
    assert log == [
        "model: 'Thought: ok\\nFinal'",
        "model: ' Answer: Forty'",
        "user: 'Forty'",
        "model: ' two'",
        "user: ' two'",
        "model: ' is it.'",
        "user: ' is it.'",
        "model: finish",
    ]


@pytest.mark.parametrize(
    ("chunks", "shown"),
    [
        # The instructions' words for the answer, copied: never on the screen.
        (("The", " answer", " itself,", " written out", " for the user."), []),
        (("<the", " answer for", " the user>"), []),
        # An answer that starts like them shows as soon as it cannot be one.
        (("The", " answer", " is", " 42."), ["The answer is", " 42."]),
        (("<b>", "bold"), ["<b>", "bold"]),
    ],
)
async def test_an_answer_that_may_be_a_placeholder_waits_until_it_is_decided(
    schemas: tuple[ollm.ToolSchema, ...], chunks: tuple[str, ...], shown: list[str]
) -> None:
    async def model(request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        yield ollm.TextEvent("Thought: ok\nFinal Answer: ")
        for chunk in chunks:
            yield ollm.TextEvent(chunk)
        yield ollm.FinishEvent("stop")

    stream = ReActStrategy().stream(FunctionProvider(model), asking(schemas))
    texts = [event.text async for event in stream if isinstance(event, ollm.TextEvent)]
    assert texts == shown


async def test_a_tool_call_comes_as_soon_as_its_json_closes_and_generation_stops(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    pulled: list[str] = []

    async def model(request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        for chunk in (
            "Thought: look\nAction: search\nAction Input: {",
            '"query": "ol',
            'lm"',
            "}",
            "\nObservation: I invent this",
            "\nFinal Answer: and this",
        ):
            pulled.append(chunk)
            yield ollm.TextEvent(chunk)
        yield ollm.FinishEvent("stop")

    provider = ScriptedProvider(
        Reply(
            [
                'Thought: look\nAction: search\nAction Input: {"query": "ol',
                'lm"}',
                "\nObservation: I invent this",
            ]
        )
    )
    for source in (FunctionProvider(model), provider):
        events: list[Any] = []
        async for event in ReActStrategy().stream(source, asking(schemas)):
            if isinstance(event, ollm.ToolCallEvent):
                # The generation was stopped before the call was even announced.
                assert source.open_streams == 0
            events.append(event)
        assert [e for e in events if not isinstance(e, ollm.ThinkingEvent)] == [
            ollm.ToolCallEvent(ollm.ToolCall("react_1", "search", {"query": "ollm"})),
            ollm.FinishEvent("stop"),
        ]
        assert thinking(events) == "look"
    assert pulled[-1] == "}"


async def test_an_inline_call_stops_at_its_closing_parenthesis(
    schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    provider = ScriptedProvider(
        Reply(['Action: search({"query":', ' "x"})', "\nAction Input: ignored"], hang=True)
    )
    events = await collect(ReActStrategy().stream(provider, asking(schemas)))
    assert events == [
        ollm.ToolCallEvent(ollm.ToolCall("react_1", "search", {"query": "x"})),
        ollm.FinishEvent("stop"),
    ]
    assert provider.open_streams == 0


async def test_an_action_after_the_final_answer_ends_it_and_the_generation(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    provider = ScriptedProvider(
        Reply(["Final Answer: It is 4.\nAct", "ion: search\n", "Action Input: {}"], hang=True)
    )
    events: list[Any] = []
    async for event in ReActStrategy().stream(provider, asking(schemas)):
        if isinstance(event, ollm.FinishEvent):
            assert provider.open_streams == 0
        events.append(event)
    assert events == [ollm.TextEvent("It is 4."), ollm.FinishEvent("stop")]


async def test_an_invented_observation_is_cut_on_the_client(
    schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    # The server ignored the stop sequence.
    provider = ScriptedProvider(
        Reply(["Final Answer: hi\nObserv", "ation: made up\nFinal Answer: more"], hang=True)
    )
    events = await collect(ReActStrategy().stream(provider, asking(schemas)))
    assert events == [ollm.TextEvent("hi"), ollm.FinishEvent("stop")]


async def test_an_implicit_answer_is_shown_when_the_stream_ends(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    log: list[str] = []

    async def model(request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        yield ollm.TextEvent("Paris is")
        yield ollm.TextEvent(" the capital.\n")
        log.append("model: finish")
        yield ollm.FinishEvent("stop", ollm.Usage(prompt_tokens=3))

    events = []
    async for event in ReActStrategy().stream(FunctionProvider(model), asking(schemas)):
        log.append(type(event).__name__)
        events.append(event)
    assert log == ["model: finish", "TextEvent", "FinishEvent"]
    assert events == [
        ollm.TextEvent("Paris is the capital."),
        ollm.FinishEvent("stop", ollm.Usage(prompt_tokens=3)),
    ]


async def test_thinking_from_every_source_is_thinking(
    schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    provider = ScriptedProvider(
        Reply(
            ["<thi", "nk>inline reasoning</th", "ink>\nThought: a thought", "\nFinal Answer: x"],
            thinking="server reasoning",
        )
    )
    events = await collect(ReActStrategy().stream(provider, asking(schemas)))
    first = next(e for e in events if isinstance(e, ollm.ThinkingEvent))
    assert first == ollm.ThinkingEvent("server reasoning")
    # Each source's thinking on its own lines, never run together ("reasoninga thought").
    assert thinking(events) == "server reasoning\ninline reasoning\na thought"
    assert texts(events) == "x"


async def test_notices_and_errors_pass_through(
    schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    provider = ScriptedProvider(
        Reply(
            ["Final Answer: par"],
            notice="loading the model",
            error=ollm.ErrorEvent("the model crashed", "PROVIDER_ERROR"),
        )
    )
    events = await collect(ReActStrategy().stream(provider, asking(schemas)))
    assert events == [
        ollm.NoticeEvent("loading the model", "info"),
        ollm.TextEvent("par"),
        ollm.ErrorEvent("the model crashed", "PROVIDER_ERROR"),
    ]


async def test_native_tool_calls_from_the_provider_are_ignored(
    schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    provider = ScriptedProvider(Reply("Final Answer: ok", tool_calls=[("search", {"query": "x"})]))
    events = await collect(ReActStrategy().stream(provider, asking(schemas)))
    assert events == [ollm.TextEvent("ok"), ollm.FinishEvent("stop")]


async def test_closing_the_stream_early_closes_the_provider_stream(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    provider = ScriptedProvider(Reply.hanging(["Final Answer: x", " b"]))
    stream = ReActStrategy().stream(provider, asking(schemas))
    iterator = stream.__aiter__()
    assert await iterator.__anext__() == ollm.TextEvent("x")
    assert provider.open_streams == 1
    aclose = getattr(iterator, "aclose", None)
    assert aclose is not None
    await aclose()
    assert provider.open_streams == 0


async def test_an_action_whose_input_is_plain_text_is_called_when_the_reply_ends(
    schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    provider = ScriptedProvider(Reply(["Action: search\nAction Input: what is", " ollm"]))
    events = await collect(ReActStrategy().stream(provider, asking(schemas)))
    assert events == [
        ollm.ToolCallEvent(ollm.ToolCall("react_1", "search", {"query": "what is ollm"})),
        ollm.FinishEvent("stop"),
    ]


async def test_an_invalid_action_is_not_called(
    schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    provider = ScriptedProvider(Reply(['Action: search\nAction Input: {"query": 3}'], hang=True))
    events = await collect(ReActStrategy().stream(provider, asking(schemas)))
    assert events == [ollm.FinishEvent("stop")]


async def test_call_ids_are_unique_in_the_conversation(
    schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    earlier = ollm.ToolCall("react_1", "search", {"query": "a"})
    history = (
        ollm.Message.user("q"),
        ollm.Message.assistant("", tool_calls=(earlier,)),
        ollm.Message.tool("r", call=earlier),
    )
    provider = ScriptedProvider(Reply('Action: search\nAction Input: {"query": "b"}'))
    events = await collect(
        ReActStrategy().stream(
            provider, ollm.ProviderRequest(model="m", messages=history, tools=schemas)
        )
    )
    assert events[0] == ollm.ToolCallEvent(ollm.ToolCall("react_2", "search", {"query": "b"}))


@pytest.mark.parametrize("chunks", splits("```\r\nThought: easy\r\nFinal Answer: 42\r\n```\r\n"))
async def test_the_closing_fence_of_a_fenced_reply_is_never_shown(
    chunks: list[str], schemas: tuple[ollm.ToolSchema, ...], collect: Any
) -> None:
    provider = ScriptedProvider(Reply(chunks))
    events = await collect(ReActStrategy().stream(provider, asking(schemas)))
    assert texts(events) == "42"
    assert thinking(events) == "easy"
