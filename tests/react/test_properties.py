"""Properties 17 to 21 and 33 of properties.md, parsers that never raise, and the streaming
scanner agreeing with the batch parser."""

from __future__ import annotations

import itertools
import json
import math
import re
from typing import Any

import msgspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import ollm
from ollm_react import (
    FormatProblem,
    ParsedAction,
    ParsedAnswer,
    ReActStrategy,
    StreamScanner,
    build_instructions,
    parse_reply,
    render_messages,
    render_observation,
)
from ollm_react._markers import is_fence_line
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

MARKER_AT_LINE_START = re.compile(
    r"^[ \t>#*_`]*(thoughts?|final[ \t_-]*answer|answer|action[ \t_-]*input|action|observation)"
    r"(?:[ \t]*#?[0-9]+)?[ \t]*[*_`]*[ \t]*:",
    re.IGNORECASE | re.MULTILINE,
)

# -- building blocks -------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**15), max_value=10**15)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=10), json_values, max_size=5)

tool_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,15}", fullmatch=True)

# Text on one line, with no marker or think tag that could change its meaning.
plain_line = (
    st.text(
        alphabet=st.characters(
            exclude_categories=["Cs"],
            exclude_characters="\n\r<\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
        ),
        min_size=1,
        max_size=40,
    )
    .map(str.strip)
    # not a marker, nor a code fence ("```py" alone is a fence the parser drops)
    .filter(lambda s: bool(s) and not MARKER_AT_LINE_START.search(s) and not is_fence_line(s))
)


@st.composite
def tool_sets(draw: st.DrawFn) -> list[ollm.ToolSchema]:
    names = draw(st.lists(tool_names, min_size=1, max_size=5, unique_by=str.lower))
    return [
        ollm.ToolSchema(
            name,
            draw(st.text(max_size=60)),
            draw(st.dictionaries(st.text(max_size=10), json_values, max_size=4)),
        )
        for name in names
    ]


def open_schema(name: str) -> ollm.ToolSchema:
    return ollm.ToolSchema(name, "Any arguments.", {"type": "object"})


@st.composite
def decorated(draw: st.DrawFn, marker: str) -> str:
    """A marker as small models write it: case, emphasis, quotes and numbering vary."""
    word = draw(st.sampled_from([marker, marker.lower(), marker.upper()]))
    style = draw(st.sampled_from(["{}:", "**{}:**", "**{}**:", "{} 1:", "> {}:", "## {}:"]))
    return style.format(word)


# -- Property 17 -----------------------------------------------------------------------


@given(tools=tool_sets(), example=st.booleans())
def test_property_17_instructions_contain_every_tool(
    tools: list[ollm.ToolSchema], example: bool
) -> None:
    """Property 17: the instructions hold every name, description and parameter schema."""
    text = build_instructions(tools, worked_example=example)
    names = ", ".join(tool.name for tool in tools)
    assert f"gives the tool name (one of: {names})" in text
    for tool in tools:
        entry = f"- {tool.name}: {tool.description.strip() or '(no description)'}"
        assert entry in text
        start = text.index(entry) + len(entry)
        schema_line = text[start:].split("\n", 2)[1]
        prefix = "  Arguments (JSON Schema): "
        assert schema_line.startswith(prefix)
        assert json.loads(schema_line[len(prefix) :]) == tool.parameters


# -- Property 18 -----------------------------------------------------------------------


@given(
    thought=plain_line,
    name=tool_names,
    args=json_objects,
    action=decorated("Action"),
    action_input=decorated("Action Input"),
    thought_marker=decorated("Thought"),
    layout=st.sampled_from(["plain", "indented", "fenced", "prose after"]),
)
def test_property_18_well_formed_actions_are_parsed(
    thought: str,
    name: str,
    args: dict[str, Any],
    action: str,
    action_input: str,
    thought_marker: str,
    layout: str,
) -> None:
    """Property 18: Thought, Action and Action Input come out of any well-formed action."""
    body = {
        "plain": json.dumps(args),
        "indented": json.dumps(args, indent=2),
        "fenced": f"```json\n{json.dumps(args)}\n```",
        "prose after": json.dumps(args) + " (that should do it)",
    }[layout]
    text = f"{thought_marker} {thought}\n{action} {name}\n{action_input} {body}\n"
    parsed = parse_reply(text, [open_schema(name), open_schema("other_" + name)])
    assert parsed == ParsedAction(name, args, thought)


@given(
    thought=plain_line,
    answer=st.lists(plain_line, min_size=1, max_size=4).map("\n".join),
    marker=decorated("Final Answer") | decorated("Answer"),
)
def test_property_18_well_formed_answers_are_parsed(thought: str, answer: str, marker: str) -> None:
    """Property 18: Thought and Final Answer come out of any well-formed answer."""
    parsed = parse_reply(f"Thought: {thought}\n{marker} {answer}\n", [open_schema("tool")])
    assert parsed == ParsedAnswer(answer, thought)


# -- Property 19 -----------------------------------------------------------------------


@given(args=json_objects)
def test_property_19_valid_json_input_passes(args: dict[str, Any]) -> None:
    """Property 19: Action Input is checked as JSON; any valid JSON object passes."""
    parsed = parse_reply(f"Action: tool\nAction Input: {json.dumps(args)}", [open_schema("tool")])
    assert parsed == ParsedAction("tool", args)


@given(
    args=json_objects.filter(bool),
    damage=st.sampled_from(["truncated", "bare word", "unclosed string"]),
)
def test_property_19_invalid_json_input_is_rejected(args: dict[str, Any], damage: str) -> None:
    """Property 19: input that is neither JSON nor a Python literal dict is rejected."""
    text = json.dumps(args)
    if damage == "truncated":
        text = text[:-1]
    elif damage == "bare word":
        text = text[:-1] + ', "extra": not valid}'
    else:
        text = text[:-1] + ', "extra": "open}'
    parsed = parse_reply(f"Action: tool\nAction Input: {text}", [open_schema("tool")])
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "bad_input"
    assert "not valid JSON" in parsed.detail


# -- Property 20 -----------------------------------------------------------------------


@given(content=st.text() | json_values.map(json.dumps), is_error=st.booleans())
def test_property_20_results_are_rendered_as_json_observations(
    content: str, is_error: bool
) -> None:
    """Property 20: any tool result goes back as `Observation: <JSON>`, in its own user turn."""
    call = ollm.ToolCall("react_1", "tool", {})
    rendered = render_messages((ollm.Message.tool(content, call=call, is_error=is_error),))
    assert len(rendered) == 1
    assert rendered[0].role == "user"
    text = rendered[0].text
    assert text == render_observation(content, is_error=is_error)
    assert text.startswith("Observation: ")
    value = json.loads(text[len("Observation: ") :])
    if is_error:
        assert value == {"error": content}
    else:
        try:
            original = json.loads(content, parse_constant=_no_constant)
        except ValueError:
            assert value == content
        else:
            if _finite(original):
                assert value == original
            else:
                assert value == content


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


# -- Property 21 -----------------------------------------------------------------------


@given(
    answer=st.lists(plain_line, min_size=1, max_size=3).map("\n".join),
    tail=st.sampled_from(
        ["", '\nAction: search\nAction Input: {"query": "x"}', "\nObservation: fake", "\n\n"]
    ),
)
async def test_property_21_a_final_answer_completes_the_turn(
    answer: str, tail: str, registries: ollm.Registries, tools: Any, calls: Any
) -> None:
    """Property 21: a reply with a Final Answer ends the turn and runs no tool."""
    calls.calls.clear()
    provider = ScriptedProvider(Reply(f"Thought: I know.\nFinal Answer: {answer}{tail}"))
    client = ollm.ChatClient(registries, provider=provider, tools=tools, tool_strategy="react")
    result = await client.run("Question?")
    assert calls.calls == []
    assert result.tool_results == []
    assert result.text == answer
    assert result.finish_reason == "stop"
    assert len(provider.requests) == 1
    assert result.messages[-1] == ollm.Message.assistant(answer, thinking="I know.")


# -- Property 33 -----------------------------------------------------------------------


@given(
    args=st.fixed_dictionaries({"city": st.text(max_size=10)}),
    damage=st.sampled_from(["truncated", "bare word"]),
)
async def test_property_33_invalid_json_asks_for_a_correction(
    args: dict[str, Any], damage: str, registries: ollm.Registries, tools: Any, calls: Any
) -> None:
    """Property 33: invalid JSON in Action Input puts a correction request into the chat."""
    calls.calls.clear()
    text = json.dumps(args)
    text = text[:-1] if damage == "truncated" else text[:-1] + ", 'units': celsius}"
    provider = ScriptedProvider(
        Reply(f"Thought: weather\nAction: get_weather\nAction Input: {text}"),
        Reply("Final Answer: sorry"),
    )
    client = ollm.ChatClient(registries, provider=provider, tools=tools, tool_strategy="react")
    result = await client.run("Weather?")
    assert calls.calls == []
    assert result.tool_results == []
    correction = result.messages[2]
    assert correction.role == "user"
    assert correction.text.startswith("Observation: Error: your reply could not be used:")
    assert "Action Input is not valid JSON" in correction.text
    assert "Reply in exactly one of these two shapes." in correction.text
    assert "Action: get_weather" in correction.text
    assert provider.requests[1].messages[-1].text == correction.text
    assert result.text == "sorry"


# -- never a traceback -----------------------------------------------------------------

FRAGMENTS = [
    "Thought:", "Final Answer:", "Answer:", "Action:", "Action Input:", "Observation:",
    "**", "`", "```", "```json\n", "\n", "\r\n", " ", "\t", "> ", "# ", "_", "(", ")",
    "{", "}", "[", "]", '"', "'", ":", ",", "search", "get_weather", "current_time",
    '{"query": "a"}', "{'city': 'Oslo',}", "<think>", "</think>", "<thi", "nk>", "Final An",
    "Action 1:", "x", "None", "NaN", "1e999", "\\", "Observ", "ation:", "\xa0", "```\r",
    "```json\r\n", "> ", "```py ", "**Final Answer:**", "final_answer:", "Thought 1:",
    " Action: search", " Action Input: ", " Final Answer: ", " Thought: ", " **Action:** ",
    '{"action": "search", "action_input": {"query": "a"}}', '{"action": "Final Answer", ',
    '"action_input": "x"}', '{"name": "current_time", "arguments": {}}', '"parameters": {}',
]  # fmt: skip

reply_texts = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=5), max_size=25).map("".join)


@given(text=st.text() | reply_texts)
def test_random_text_never_makes_the_parser_raise(
    text: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    """Whatever the text: an action, a final answer or a format problem, never an exception."""
    parsed = parse_reply(text, schemas)
    assert isinstance(parsed, (ParsedAction, ParsedAnswer, FormatProblem))
    if isinstance(parsed, ParsedAction):
        assert parsed.tool in {s.name for s in schemas}
    if isinstance(parsed, FormatProblem):
        assert parsed.detail


def _scan(chunks: list[str]) -> tuple[list[tuple[str, str]], str | None]:
    """What a scanner shows for these chunks, merged by kind, and where it stopped."""
    scanner = StreamScanner()
    shown: list[tuple[str, str]] = []
    for chunk in chunks:
        shown.extend(scanner.feed(chunk))
    shown.extend(scanner.end())
    merged: list[tuple[str, str]] = []
    for kind, piece in shown:
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + piece)
        elif piece:
            merged.append((kind, piece))
    return merged, scanner.stop


@given(text=st.text() | reply_texts, cuts=st.lists(st.integers(0, 200), max_size=8))
def test_random_chunks_never_make_the_scanner_raise(text: str, cuts: list[int]) -> None:
    """Never raises, and however the reply is split, shows the same and stops the same."""
    whole = _scan([text])
    assert _scan(_chunks(text, cuts)) == whole
    shown = "".join(piece for _, piece in whole[0])
    assert len(shown) <= len(text)


def _chunks(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


@given(text=reply_texts, cuts=st.lists(st.integers(0, 120), max_size=8))
@example(text="Thought: I know. Final Answer: 42\nFinal Answer:", cuts=[])
async def test_what_streams_is_what_the_review_keeps(
    text: str, cuts: list[int], schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    """However the reply is chunked: the text shown is the answer kept, the call the one run."""
    strategy = ReActStrategy()
    provider = ScriptedProvider(Reply(_chunks(text, cuts)))
    request = ollm.ProviderRequest(model="m", messages=(ollm.Message.user("q"),), tools=schemas)
    shown: list[str] = []
    streamed_calls: list[ollm.ToolCall] = []
    async for event in strategy.stream(provider, request):
        if isinstance(event, ollm.TextEvent):
            shown.append(event.text)
        elif isinstance(event, ollm.ToolCallEvent):
            streamed_calls.append(event.call)
    assert provider.open_streams == 0
    review = strategy.review(
        ollm.Message.assistant("".join(shown), tool_calls=tuple(streamed_calls))
    )
    assert review is not None
    assert review.message is not None
    parsed = parse_reply("".join(_chunks(text, cuts)), schemas)
    if isinstance(parsed, ParsedAnswer):
        assert "".join(shown) == review.message.text == parsed.answer
    else:
        assert shown == []
    assert streamed_calls == list(review.message.tool_calls)
    assert bool(streamed_calls) == isinstance(parsed, ParsedAction)


@given(text=reply_texts, cuts=st.lists(st.integers(0, 120), max_size=8), rest=reply_texts)
@example(text="0 Action Input:", cuts=[], rest="")
@example(text="W Action: search", cuts=[2], rest="")
@example(text="The label reads Final Answer: 42", cuts=[16], rest="")
@example(text='{"name": "current_time", "arguments": {}}', cuts=[], rest="")
@example(text="Thought: Final Answer: ```json\nFinal Answer:", cuts=[], rest="")
def test_the_scanner_shows_what_the_batch_parser_returns(
    text: str, cuts: list[int], rest: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    """However a reply is chunked: the text the scanner shows is the parser's answer, and
    once the scanner stops the stream, nothing the model would have written next changes
    what the parser returns."""
    scanner = StreamScanner(schemas)
    shown: list[tuple[str, str]] = []
    read: list[str] = []
    for chunk in _chunks(text, cuts):
        read.append(chunk)
        shown.extend(scanner.feed(chunk))
        if scanner.stop is not None:
            break
    shown.extend(scanner.end())
    reply = "".join(read)
    parsed = parse_reply(reply, schemas)
    answer = "".join(piece for kind, piece in shown if kind == "text")
    if answer or scanner.answering or (isinstance(parsed, ParsedAnswer) and parsed.implicit):
        assert answer == (parsed.answer if isinstance(parsed, ParsedAnswer) else "")
    if scanner.stop is not None:
        assert _meaning(parse_reply(reply + rest, schemas)) == _meaning(parsed)


def _meaning(parsed: ParsedAction | ParsedAnswer | FormatProblem) -> object:
    """What a reply means, without the text it was read from."""
    return msgspec.structs.replace(parsed, text="") if isinstance(parsed, FormatProblem) else parsed
