"""What mutation testing of the parser, the markers and the think filter left untested.

The corrections of a call written as a JSON object, word for word (the model reads them);
what such a call keeps of its thought; which JSON in a reply counts as a call; the closing
fence of a fenced answer; and, chunk by chunk, which unfinished lines the stream holds back
and where a ``<think>`` tag may open a block.
"""

from __future__ import annotations

import pytest

import ollm
from ollm_react import FormatProblem, ParsedAction, ParsedAnswer, StreamScanner, parse_reply

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


def streamed(chunks: list[str]) -> dict[str, str]:
    """What a scanner shows for these chunks, joined by kind."""
    scanner = StreamScanner()
    kinds: dict[str, str] = {}
    for kind, text in [out for chunk in chunks for out in scanner.feed(chunk)] + scanner.end():
        kinds[kind] = kinds.get(kind, "") + text
    return kinds


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


# -- the closing fence of a fenced answer ------------------------------------------------

FENCED: dict[str, tuple[str, ParsedAnswer]] = {
    # the fence opened after the first line, before the marker: its close is dropped
    "a fence opened after other text": (
        "Thought: x\n```\nFinal Answer: 42\n```",
        ParsedAnswer("42", "x"),
    ),
    # backticks inside a line open no fence: the answer keeps all its fence lines
    "backticks inside the thought's line": (
        "Thought: I use ``` here\nFinal Answer: run:\n```\nls\n```\n```",
        ParsedAnswer("run:\n```\nls\n```\n```", "I use ``` here"),
    ),
    # ... nor inside the answer's lines: the fenced reply's close is still dropped
    "backticks inside the answer's line": (
        "```\nThought: x\nFinal Answer: here\nuse ``` to fence\n```",
        ParsedAnswer("here\nuse ``` to fence", "x"),
    ),
}


@pytest.mark.parametrize(("reply", "parsed"), FENCED.values(), ids=FENCED.keys())
def test_only_fence_lines_count_for_the_closing_fence(reply: str, parsed: ParsedAnswer) -> None:
    assert parse_reply(reply, _search()) == parsed


# -- the stream: which unfinished lines are held back -------------------------------------


@pytest.mark.parametrize(
    "partial",
    ["F", "Fi", "Fin", "Final", "Final ", "Final_", "Final-", "Final  ", "Action In", "Obs"],
)
def test_a_line_that_may_still_become_a_marker_is_held_back(partial: str) -> None:
    scanner = StreamScanner()
    assert scanner.feed("Thought: x\n" + partial) == [("thinking", "x")]


@pytest.mark.parametrize("line", ["Answered", "Thoughtful", "Finale", "Answerxxxx", "Actionxx"])
def test_a_line_that_cannot_become_a_marker_is_shown_at_once(line: str) -> None:
    scanner = StreamScanner()
    assert scanner.feed("Thought: x\n" + line) == [("thinking", "x\n" + line)]


def test_a_marker_with_joined_words_is_one_under_every_split() -> None:
    reply = "Thought: x\nFinal_Answer: 42"
    for cut in range(1, len(reply)):
        assert streamed([reply[:cut], reply[cut:]]) == {"thinking": "x", "text": "42"}, cut


@pytest.mark.parametrize(
    ("first_line", "thinking", "answer"),
    [
        # a fence line of 80 characters opens the fenced reply: its close is dropped
        ("```" + "x" * 77, "x", "42"),
        ("```" + " " * 77, "x", "42"),
        # 81 characters are a line of text, and the last fence is the answer's
        ("```" + "x" * 78, "```" + "x" * 78 + "\nx", "42\n```"),
    ],
)
def test_the_longest_fence_line_streams_as_the_parser_reads_it(
    first_line: str, thinking: str, answer: str
) -> None:
    reply = f"{first_line}\nThought: x\nFinal Answer: 42\n```"
    assert parse_reply(reply) == ParsedAnswer(answer, thinking)
    for size in (1, 7, len(reply)):
        chunks = [reply[i : i + size] for i in range(0, len(reply), size)]
        assert streamed(chunks) == {"thinking": thinking, "text": answer}, size


# -- the stream: where a <think> tag may open a block -------------------------------------

THINK_CHUNKS: list[tuple[list[str], bool]] = [
    # (chunks, whether the <think> tag stays text): a tag opens a block only at the start
    # of a line, after spaces or tabs; the chunk that ends the line before it must tell
    (["Thought: x\n", "<think>y</think>Final Answer: z"], False),
    (["Thought: x\nmore\n", "<think>y</think>Final Answer: z"], False),
    (["Thought: x\n", "  ", "<think>y</think>Final Answer: z"], False),
    (["Thought: x\n", "\t", " ", "<think>y</think>Final Answer: z"], False),
    (["Thought: x\ny", "<think>y</think>Final Answer: z"], True),
    (["Thought: x\n", "ab", "<think>y</think>Final Answer: z"], True),
    (["Thought: x\n", "XX", "<think>y</think>Final Answer: z"], True),
    (["Thought: x\nXX", "<think>y</think>Final Answer: z"], True),
    # a no-break space is not a space here (nor in the batch parser)
    (["Thought: x\n\xa0", "<think>y</think>Final Answer: z"], True),
    (["Thought: x\n", "\xa0", "<think>y</think>Final Answer: z"], True),
]


@pytest.mark.parametrize(("chunks", "tag_is_text"), THINK_CHUNKS)
def test_a_think_tag_opens_a_block_only_at_a_line_start_however_the_reply_is_cut(
    chunks: list[str], tag_is_text: bool
) -> None:
    reply = "".join(chunks)
    assert streamed(chunks) == streamed([reply])
    assert ("<think>" in streamed(chunks)["thinking"]) is tag_is_text
    # the batch parser agrees: the answer's marker starts a line only after a block
    assert isinstance(parse_reply(reply, _search()), ParsedAnswer) is not tag_is_text


# -- the tool an Action line names --------------------------------------------------------


def _tools(*names: str) -> tuple[ollm.ToolSchema, ...]:
    return tuple(ollm.ToolSchema(name=name, parameters=_search()[0].parameters) for name in names)


def test_a_name_with_a_space_is_the_tool_it_spells_before_its_first_word() -> None:
    reply = 'Action: search web\nAction Input: {"query": "owls"}'
    assert parse_reply(reply, _tools("search", "search_web")) == ParsedAction("search_web", OWLS)
    # and only when it spells none, its first word
    reply = 'Action: search (the web)\nAction Input: {"query": "owls"}'
    assert parse_reply(reply, _tools("search", "search_web")) == ParsedAction("search", OWLS)


def test_lines_between_the_action_and_its_input_are_not_the_name() -> None:
    reply = 'Action: search web\nfor the owls\nand the bats\nAction Input: {"query": "owls"}'
    assert parse_reply(reply, _tools("search", "search_web")) == ParsedAction("search_web", OWLS)


@pytest.mark.parametrize(
    ("name", "shown"), [(_NAME_100, _NAME_100), (_NAME_101, _NAME_100 + "...")]
)
def test_an_unknown_name_on_the_action_line_is_shown_up_to_100_characters(
    name: str, shown: str
) -> None:
    parsed = parse_reply(f"Action: {name}\nAction Input: {{}}", _search())
    assert isinstance(parsed, FormatProblem)
    assert (parsed.kind, parsed.detail, parsed.tool) == (
        "unknown_tool",
        f"there is no tool named {shown!r}",
        shown,
    )


def test_a_final_answer_written_as_json_keeps_its_characters() -> None:
    reply = '{"action": "Final Answer", "action_input": {"città": "Roma"}}'
    assert parse_reply(reply, _search()) == ParsedAnswer('{"città": "Roma"}')
