"""A call written as a JSON object (``{"action": ..., "action_input": ...}`` and kin): each
problem in the words the model reads, what such a call keeps of its thought and its
characters, and which JSON in a reply counts as a call."""

from __future__ import annotations

import pytest

import ollm
from ollm_react import FormatProblem, ParsedAction, ParsedAnswer, parse_reply

OWLS = {"query": "owls"}
CALL = '{"action": "search", "action_input": {"query": "owls"}}'


def _search() -> tuple[ollm.ToolSchema, ...]:
    return (
        ollm.ToolSchema(
            name="search",
            parameters={
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        ),
    )


# -- a call written as a JSON object: each problem in full --------------------------------

_NAME_100 = "y" * 100
_NAME_101 = "y" * 101


def _blob(body: str) -> str:
    return f"Thought: t\nAction:\n{body}"


BLOB_PROBLEMS: dict[str, tuple[str, FormatProblem]] = {
    # The decoder's words quote the reply: only the first "Action Input" (the decoder's
    # own) becomes "the Action's JSON"; the one quoted from the model's text stays.
    "not valid JSON": (
        _blob('{"action": "search", "note": "Action Input", oops}'),
        FormatProblem(
            kind="bad_input",
            detail=(
                "the Action's JSON is not valid JSON: Expecting property name enclosed in "
                'double quotes at line 1, column 46 (char 45), near \'e": "Action Input", oops}\''
            ),
            text=_blob('{"action": "search", "note": "Action Input", oops}'),
            thought="t",
        ),
    ),
    "names no tool": (
        _blob('{"action_input": {}}'),
        FormatProblem(
            kind="missing_tool",
            detail=(
                'the Action\'s JSON names no tool: write {"action": "TOOL", "action_input": '
                "{...}}, or the tool's name on the Action line and its input on an Action "
                "Input line"
            ),
            text=_blob('{"action_input": {}}'),
            thought="t",
        ),
    ),
    "unknown tool": (
        _blob('{"action": "serch", "action_input": {}}'),
        FormatProblem(
            kind="unknown_tool",
            detail="there is no tool named 'serch'",
            text=_blob('{"action": "serch", "action_input": {}}'),
            thought="t",
            tool="serch",
            suggestion="search",
        ),
    ),
    "unknown tool, a name of 100 characters": (
        _blob(f'{{"action": "{_NAME_100}", "action_input": {{}}}}'),
        FormatProblem(
            kind="unknown_tool",
            detail=f"there is no tool named {_NAME_100!r}",
            text=_blob(f'{{"action": "{_NAME_100}", "action_input": {{}}}}'),
            thought="t",
            tool=_NAME_100,
        ),
    ),
    "unknown tool, a name of 101 characters": (
        _blob(f'{{"action": "{_NAME_101}", "action_input": {{}}}}'),
        FormatProblem(
            kind="unknown_tool",
            detail=f"there is no tool named {_NAME_100 + '...'!r}",
            text=_blob(f'{{"action": "{_NAME_101}", "action_input": {{}}}}'),
            thought="t",
            tool=_NAME_100 + "...",
        ),
    ),
    "arguments that do not fit": (
        _blob('{"action": "search", "action_input": 7}'),
        FormatProblem(
            kind="bad_input",
            detail='Action Input must be a JSON object such as {"query": "..."}, not a number',
            text=_blob('{"action": "search", "action_input": 7}'),
            thought="t",
            tool="search",
        ),
    ),
}


@pytest.mark.parametrize(("reply", "problem"), BLOB_PROBLEMS.values(), ids=BLOB_PROBLEMS.keys())
def test_each_problem_of_a_json_call_in_full(reply: str, problem: FormatProblem) -> None:
    assert parse_reply(reply, _search()) == problem


# -- a call written as a JSON object: what it keeps -------------------------------------

BLOB_RESULTS: dict[str, tuple[str, ParsedAction | ParsedAnswer]] = {
    "a call keeps its thought": (_blob(CALL), ParsedAction("search", OWLS, "t")),
    "an answer keeps its thought": (
        _blob('{"action": "Final Answer", "action_input": "Owls."}'),
        ParsedAnswer("Owls.", "t"),
    ),
    "an answer given as an object is its JSON": (
        _blob('{"action": "Final Answer", "action_input": {"owls": 3}}'),
        ParsedAnswer('{"owls": 3}', "t"),
    ),
}


@pytest.mark.parametrize(("reply", "parsed"), BLOB_RESULTS.values(), ids=BLOB_RESULTS.keys())
def test_what_a_json_call_keeps(reply: str, parsed: ParsedAction | ParsedAnswer) -> None:
    assert parse_reply(reply, _search()) == parsed


# -- which JSON object in a reply is the call -------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        f"I will call {CALL}",  # a reply with no marker is a call only if it is one
        '{"owls": 3} ' + CALL,  # ... and only its first object counts
    ],
)
def test_a_reply_without_markers_that_only_holds_a_call_is_an_answer(reply: str) -> None:
    assert parse_reply(reply, _search()) == ParsedAnswer(reply, implicit=True)


@pytest.mark.parametrize(
    "reply",
    [
        # every brace of a thought is tried, up to the call
        f"Thought: options {{a}} or the call:\n{CALL}",
        f"Thought: {{}} then {{x}} then {CALL}",
        # braces doubled as in a prompt template: the call starts at the second one
        "Thought: x {" + CALL + "}",
    ],
)
def test_a_call_after_other_braces_in_a_thought_is_found(reply: str) -> None:
    parsed = parse_reply(reply, _search())
    assert isinstance(parsed, ParsedAction)
    assert (parsed.tool, parsed.args) == ("search", OWLS)


def test_a_final_answer_written_as_json_keeps_its_characters() -> None:
    reply = '{"action": "Final Answer", "action_input": {"città": "Roma"}}'
    assert parse_reply(reply, _search()) == ParsedAnswer('{"città": "Roma"}')
