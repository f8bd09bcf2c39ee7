"""Shapes small models really write: JSON action blobs, fenced or bare, markers in the
middle of a line; in batch and streaming under every chunking, and through a chat."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

import ollm
from ollm_react import ReActStrategy
from ollm_react._parser import FormatProblem, ParsedAction, ParsedAnswer, parse_reply
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

OWLS = {"query": "owls"}

ACTIONS: dict[str, str] = {
    "langchain blob, fenced": (
        'Thought: I need to search.\nAction:\n```json\n{"action": "search", '
        '"action_input": {"query": "owls"}}\n```'
    ),
    "langchain blob, bare": (
        'Thought: I need to search.\nAction:\n{"action": "search", "action_input": '
        '{"query": "owls"}}'
    ),
    "function blob, fenced without a language": (
        'Action:\n```\n{"name": "search", "arguments": {"query": "owls"}}\n```'
    ),
    "function blob with string arguments": (
        'Action:\n{"name": "search", "arguments": "{\\"query\\": \\"owls\\"}"}'
    ),
    "llama parameters": 'Action: {"name": "search", "parameters": {"query": "owls"}}',
    "all on one line": 'Thought: x Action: search Action Input: {"query": "owls"}',
    "inline action, next-line input": 'Thought: x Action: search\nAction Input: {"query": "owls"}',
    "no line-start marker": 'I will look it up. Action: search Action Input: {"query": "owls"}',
    "bold inline markers": 'Thought: x **Action:** search **Action Input:** {"query": "owls"}',
    "blob inside the thought": (
        'Thought: I will call it.\n```json\n{"action": "search", "action_input": '
        '{"query": "owls"}}\n```'
    ),
    "a reply that is only a blob": '{"action": "search", "action_input": {"query": "owls"}}',
}

ANSWERS: dict[str, tuple[str, str]] = {
    "langchain final answer blob": (
        'Thought: done.\nAction:\n```json\n{"action": "Final Answer", "action_input": '
        '"Owls are birds."}\n```',
        "Owls are birds.",
    ),
    "final answer mid-line": ("Thought: easy. Final Answer: Owls are birds.", "Owls are birds."),
    "answer blob": ('Action: {"action": "Answer", "action_input": "Owls."}', "Owls."),
    "prose that looks like a marker": (
        "Press the button that says Action: Start, then wait.",
        "Press the button that says Action: Start, then wait.",
    ),
    "a JSON answer that is not a call": ('{"owls": 3, "cats": 2}', '{"owls": 3, "cats": 2}'),
}


@pytest.mark.parametrize("text", ACTIONS.values(), ids=ACTIONS.keys())
def test_batch_reads_each_action_shape(text: str, schemas: tuple[ollm.ToolSchema, ...]) -> None:
    parsed = parse_reply(text, schemas)
    assert parsed == ParsedAction("search", OWLS, parsed.thought)  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "answer"), ANSWERS.values(), ids=ANSWERS.keys())
def test_batch_reads_each_answer_shape(
    text: str, answer: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    parsed = parse_reply(text, schemas)
    assert isinstance(parsed, ParsedAnswer)
    assert parsed.answer == answer


def test_a_fence_language_tag_is_never_a_tool_name(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    parsed = parse_reply('Action:\n```json\n{"query": "owls"}\n```', schemas)
    assert isinstance(parsed, FormatProblem)
    assert "'json'" not in parsed.detail
    assert parsed.kind == "missing_tool"
    assert '"action_input"' in parsed.detail


def test_an_unknown_tool_in_a_blob_is_named(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    parsed = parse_reply('Action:\n{"action": "serch", "action_input": {}}', schemas)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "unknown_tool"
    assert parsed.suggestion == "search"


def test_an_inline_action_is_never_called_input_before_action(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    parsed = parse_reply("Thought: x Action: search\nAction Input: not json {", schemas)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind != "input_before_action"
    assert "Action Input without" not in parsed.detail


def chunkings(text: str) -> list[list[str]]:
    """1 character, 3 characters, and random splits (seeded) of ``text``."""
    ones = list(text)
    threes = [text[i : i + 3] for i in range(0, len(text), 3)]
    rng = random.Random(len(text))
    randoms = []
    for _ in range(5):
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 8))))
        points = [0, *cuts, len(text)]
        randoms.append([text[a:b] for a, b in itertools.pairwise(points)])
    return [ones, threes, *randoms, [text]]


async def stream_events(
    chunks: list[str], schemas: tuple[ollm.ToolSchema, ...]
) -> tuple[str, list[ollm.ToolCall]]:
    strategy = ReActStrategy()
    provider = ScriptedProvider(Reply(chunks))
    request = ollm.ProviderRequest(model="m", messages=(ollm.Message.user("q"),), tools=schemas)
    shown: list[str] = []
    calls: list[ollm.ToolCall] = []
    async for event in strategy.stream(provider, request):
        if isinstance(event, ollm.TextEvent):
            shown.append(event.text)
        elif isinstance(event, ollm.ToolCallEvent):
            calls.append(event.call)
    return "".join(shown), calls


@pytest.mark.parametrize("text", ACTIONS.values(), ids=ACTIONS.keys())
async def test_streaming_calls_each_action_shape_under_every_chunking(
    text: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    for chunks in chunkings(text):
        shown, calls = await stream_events(chunks, schemas)
        assert shown == "", chunks
        assert [(c.name, c.args) for c in calls] == [("search", OWLS)], chunks


@pytest.mark.parametrize(("text", "answer"), ANSWERS.values(), ids=ANSWERS.keys())
async def test_streaming_shows_each_answer_shape_under_every_chunking(
    text: str, answer: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    for chunks in chunkings(text):
        shown, calls = await stream_events(chunks, schemas)
        assert shown == answer, chunks
        assert calls == []


async def test_a_thought_with_markers_is_never_accepted_as_the_answer(
    registries: ollm.Registries, tools: list[ollm.Tool]
) -> None:
    # Twice a thought whose "Action" names no tool: the old recovery showed the second
    # as the answer, markers and all.
    bad = "Thought: I will run action: search with owls"
    provider = ScriptedProvider(Reply([bad]), Reply([bad]), Reply(["Final Answer: Owls."]))
    client = ollm.ChatClient(registries, provider=provider, tools=tools, tool_strategy="react")
    result = await client.run("owls?")
    assert result.text == "Owls."
    assert "action:" not in result.text


async def test_an_inline_call_runs_the_tool_through_a_chat(
    registries: ollm.Registries, tools: list[ollm.Tool], calls: Any
) -> None:
    provider = ScriptedProvider(
        Reply([ACTIONS["all on one line"]]), Reply(["Final Answer: Owls hoot."])
    )
    client = ollm.ChatClient(registries, provider=provider, tools=tools, tool_strategy="react")
    result = await client.run("owls?")
    assert calls.calls == [("search", OWLS)]
    assert result.text == "Owls hoot."


async def test_the_last_answer_at_the_turn_limit_never_shows_protocol_text(
    registries: ollm.Registries, tools: list[ollm.Tool]
) -> None:
    provider = ScriptedProvider(
        Reply(['Action: search\nAction Input: {"query": "owls"}']),
        Reply(["Thought: Owls are nocturnal. action: search again"]),
    )
    client = ollm.ChatClient(
        registries, provider=provider, tools=tools, tool_strategy="react", max_turns=1
    )
    result = await client.run("owls?")
    assert result.text == "Owls are nocturnal."


def test_a_mid_line_action_with_an_unknown_tool_is_named_not_called_thought_only(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    parsed = parse_reply(
        'Thought: I need it. Action: serch Action Input: {"query": "owls"}', schemas
    )
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "unknown_tool"
    assert parsed.suggestion == "search"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (
            'Thought: I need to search.\nAction:\n{"action": "serch", "action_input": {}}',
            "unknown_tool",
        ),
        ('Thought: I need to search.\nAction:\n{"action_input": {}}', "missing_tool"),
        (
            'Thought: I need to search.\nAction:\n{"action": "search", "action_input": 7}',
            "bad_input",
        ),
        (
            'Thought: I need to search.\nAction:\n{"action": "Final Answer", "action_input": ""}',
            "empty_answer",
        ),
        ('Thought: I need to search.\nAction:\n{"action": "search",', "bad_input"),
    ],
)
def test_a_blob_problem_keeps_the_reply_and_the_thought(
    text: str, kind: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    parsed = parse_reply(text, schemas)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == kind
    assert parsed.text == text
    assert parsed.thought == "I need to search."
    assert parsed.detail


def _tool(name: str) -> ollm.ToolSchema:
    return ollm.ToolSchema(name=name, parameters={"type": "object", "properties": {}})


# what a model writes after "Action:" -> the tool it means, or (problem, suggestion)
TOOL_NAMES: list[tuple[str, str | tuple[str, str | None]]] = [
    ("[search]", "search"),
    ("<search>", "search"),
    ("`search`.", "search"),
    ("**search**:", "search"),
    ('"search",', "search"),
    ("[ `search` ]", "search"),
    ("SEARCH", "search"),
    ("GetWeather", "get_weather"),
    ("get-weather", "get_weather"),
    ("[]", ("missing_tool", None)),
    ("<>", ("missing_tool", None)),
    ("serch", ("unknown_tool", "search")),
    ("seaxyz", ("unknown_tool", "search")),  # as close as a suggestion gets (0.5)
    ("zzzzzz", ("unknown_tool", None)),
]


@pytest.mark.parametrize(("written", "meant"), TOOL_NAMES)
def test_the_tool_a_written_name_means(written: str, meant: str | tuple[str, str | None]) -> None:
    tools = (_tool("search"), _tool("get_weather"))
    parsed = parse_reply(f"Thought: t\nAction: {written}\nAction Input: {{}}", tools)
    if isinstance(meant, str):
        assert parsed == ParsedAction(meant, {}, "t")
    else:
        assert isinstance(parsed, FormatProblem)
        assert (parsed.kind, parsed.suggestion) == meant


def test_names_that_differ_only_in_case_are_told_apart_or_suggested() -> None:
    tools = (_tool("Search"), _tool("search"))
    assert parse_reply("Action: Search\nAction Input: {}", tools) == ParsedAction("Search", {}, "")
    assert parse_reply("Action: search\nAction Input: {}", tools) == ParsedAction("search", {}, "")
    ambiguous = parse_reply("Action: SEARCH\nAction Input: {}", tools)
    assert isinstance(ambiguous, FormatProblem)
    assert (ambiguous.kind, ambiguous.suggestion) == ("unknown_tool", "Search")


def test_case_is_forgiven_before_punctuation() -> None:
    tools = (_tool("get_weather"), _tool("get-weather"))
    assert parse_reply("Action: GET_WEATHER\nAction Input: {}", tools) == ParsedAction(
        "get_weather", {}, ""
    )
    ambiguous = parse_reply("Action: GetWeather\nAction Input: {}", tools)
    assert isinstance(ambiguous, FormatProblem)
    assert (ambiguous.kind, ambiguous.suggestion) == ("unknown_tool", "get_weather")


def _needs_q(name: str) -> ollm.ToolSchema:
    return ollm.ToolSchema(
        name=name,
        parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    )


_LONG = "y" * 120
# Each problem in full: its words, the text, the thought, the tool and the suggestion all
# go into the correction the model reads.
PROBLEMS: list[tuple[str, FormatProblem]] = [
    (
        "Thought: t\nAction:\nAction Input: {}",
        FormatProblem(
            kind="missing_tool",
            detail="the Action line had no tool name",
            text="Thought: t\nAction:\nAction Input: {}",
            thought="t",
            tool=None,
            suggestion=None,
        ),
    ),
    (
        "Thought: t\nAction: search",
        FormatProblem(
            kind="missing_input",
            detail="the Action had no Action Input line after it",
            text="Thought: t\nAction: search",
            thought="t",
            tool="search",
            suggestion=None,
        ),
    ),
    (
        'Thought: t\nAction: search\nAction Input: {"x": 1}',
        FormatProblem(
            kind="bad_input",
            detail=(
                "Action Input does not fit the arguments of search: "
                "Object missing required field `q` - at `$`"
            ),
            text='Thought: t\nAction: search\nAction Input: {"x": 1}',
            thought="t",
            tool="search",
            suggestion=None,
        ),
    ),
    (
        "Thought: t\nAction: search(q=)",
        FormatProblem(
            kind="bad_input",
            detail="the call's arguments are not valid: write them as one JSON object",
            text="Thought: t\nAction: search(q=)",
            thought="t",
            tool="search",
            suggestion=None,
        ),
    ),
    (
        "Thought: t\nAction: look it up\nAction Input: {}",
        FormatProblem(
            kind="unknown_tool",
            detail="there is no tool named 'look it up'",
            text="Thought: t\nAction: look it up\nAction Input: {}",
            thought="t",
            tool="look it up",
            suggestion=None,
        ),
    ),
    (
        'Thought: t\nAction: GetWeather\nAction Input: {"q": "a"}',
        FormatProblem(
            kind="unknown_tool",
            detail="the tool name 'GetWeather' could mean get_weather or get-weather",
            text='Thought: t\nAction: GetWeather\nAction Input: {"q": "a"}',
            thought="t",
            tool="GetWeather",
            suggestion="get_weather",
        ),
    ),
    (
        'Thought: t\nAction Input: {"q": "a"}',
        FormatProblem(
            kind="input_before_action",
            detail="the reply had an Action Input but no Action line before it",
            text='Thought: t\nAction Input: {"q": "a"}',
            thought="t",
            tool=None,
            suggestion=None,
        ),
    ),
    (
        "Thought: only thinking",
        FormatProblem(
            kind="thought_only",
            detail="the reply had a Thought but no Action and no Final Answer",
            text="Thought: only thinking",
            thought="only thinking",
            tool=None,
            suggestion=None,
        ),
    ),
    (
        '{"action": "search"}',
        FormatProblem(
            kind="bad_input",
            detail='Action Input is missing: search needs a JSON object with "q"',
            text='{"action": "search"}',
            thought="",
            tool="search",
            suggestion=None,
        ),
    ),
    (
        '{"action": "Final Answer"}',
        FormatProblem(
            kind="empty_answer",
            detail="the Final Answer was empty",
            text='{"action": "Final Answer"}',
            thought="",
            tool=None,
            suggestion=None,
        ),
    ),
    (
        f"Thought: t\nAction: {_LONG}\nAction Input: {{}}",
        FormatProblem(
            kind="unknown_tool",
            detail=f"there is no tool named {_LONG[:100] + '...'!r}",
            text=f"Thought: t\nAction: {_LONG}\nAction Input: {{}}",
            thought="t",
            tool=_LONG[:100] + "...",
        ),
    ),
]


@pytest.mark.parametrize(("reply", "problem"), PROBLEMS)
def test_each_problem_in_full(reply: str, problem: FormatProblem) -> None:
    tools = (_needs_q("search"), _needs_q("get_weather"), _needs_q("get-weather"))
    assert parse_reply(reply, tools) == problem
