"""The batch parser, one rule of react-guide.md at a time."""

from __future__ import annotations

import pytest

import ollm
from ollm_react import FormatProblem, ParsedAction, ParsedAnswer, parse_reply, resolve_tool

# -- markers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "Action: search",
        "action: search",
        "ACTION: search",
        "  Action: search",
        "> Action: search",
        "## Action: search",
        "* Action: search",
        "_Action:_ search",
        "`Action:` search",
        "**Action:** search",
        "**Action**: search",
        "Action 1: search",
        "Action #2: search",
    ],
)
def test_decorated_action_markers_count(line: str, schemas: tuple[ollm.ToolSchema, ...]) -> None:
    parsed = parse_reply(f'Thought: look it up\n{line}\nAction Input: {{"query": "ollm"}}', schemas)
    assert parsed == ParsedAction("search", {"query": "ollm"}, "look it up")


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Final Answer: 42", "42"),
        ("final answer: 42", "42"),
        ("FINAL_ANSWER: 42", "42"),
        ("**Final Answer:** 42", "42"),
        ("**Final Answer**: 42", "42"),
        ("### Final Answer: 42", "42"),
        ("> Final Answer: 42", "42"),
        ("Final Answer:\n\n42\n", "42"),
        ("**Final Answer:** **42** exactly", "**42** exactly"),
        ("Final Answer: *emphasis* kept", "*emphasis* kept"),
        ("Final Answer: `code` kept", "`code` kept"),
    ],
)
def test_final_answer_markers_and_emphasis(
    text: str, answer: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    assert parse_reply(f"Thought: I know it.\n{text}", schemas) == ParsedAnswer(
        answer, "I know it."
    )


def test_a_marker_inside_a_line_is_not_a_marker(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    text = "Final Answer: the marker Action: is inline, and so is Observation: here."
    parsed = parse_reply(text, schemas)
    assert parsed == ParsedAnswer("the marker Action: is inline, and so is Observation: here.", "")


def test_words_that_start_like_markers_are_text(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    text = "Thoughtful people agree.\nAnswered: yes\nActions: none"
    assert parse_reply(text, schemas) == ParsedAnswer(text, implicit=True)


# -- the Observation cut ---------------------------------------------------------------


def test_an_invented_observation_and_what_follows_are_cut(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    text = (
        "Thought: I need the weather.\n"
        "Action: get_weather\n"
        'Action Input: {"city": "Paris"}\n'
        'Observation: {"temperature": 35}\n'
        "Thought: It is hot.\n"
        "Final Answer: It is 35 degrees."
    )
    parsed = parse_reply(text, schemas)
    assert parsed == ParsedAction("get_weather", {"city": "Paris"}, "I need the weather.")


def test_the_cut_applies_to_the_text_kept_for_a_malformed_reply(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    text = "Thought: hmm\nAction: get_weather\nObservation: sunny\nFinal Answer: sunny"
    parsed = parse_reply(text, schemas)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "missing_input"
    assert parsed.text == "Thought: hmm\nAction: get_weather"


def test_a_reply_that_starts_with_an_observation_is_empty(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    parsed = parse_reply("Observation: I made this up", schemas)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "empty"


# -- which marker wins -----------------------------------------------------------------


def test_a_final_answer_after_an_action_is_speculation(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    text = 'Action: search\nAction Input: {"query": "ollm"}\nFinal Answer: ollm is great'
    assert parse_reply(text, schemas) == ParsedAction("search", {"query": "ollm"})


def test_an_action_after_a_final_answer_ends_the_answer(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    text = 'Final Answer: It is sunny.\nAction: search\nAction Input: {"query": "x"}'
    assert parse_reply(text, schemas) == ParsedAnswer("It is sunny.")


def test_a_new_thought_after_a_final_answer_ends_it(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    text = "Final Answer: It is sunny.\nThought: should I check again?"
    assert parse_reply(text, schemas) == ParsedAnswer("It is sunny.")


def test_a_repeated_final_answer_line_stays_in_the_answer(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    text = "Final Answer: one\nAnswer: two"
    assert parse_reply(text, schemas) == ParsedAnswer("one\nAnswer: two")


def test_answer_is_an_alias_of_final_answer(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    assert parse_reply("Thought: easy\nAnswer: 4", schemas) == ParsedAnswer("4", "easy")


def test_text_without_markers_is_an_implicit_final_answer(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    text = "  Paris is the capital of France.\n\nIt has 2 million people.  "
    assert parse_reply(text, schemas) == ParsedAnswer(
        "Paris is the capital of France.\n\nIt has 2 million people.", implicit=True
    )


def test_text_before_the_first_marker_is_part_of_the_thought(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    text = "I should check.\nThought: the weather is needed\nFinal Answer: ok"
    assert parse_reply(text, schemas) == ParsedAnswer(
        "ok", "I should check.\nthe weather is needed"
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("<think>only thinking</think>", "empty"),
        ("Thought: I am thinking.", "thought_only"),
        ("Final Answer:   ", "empty_answer"),
        ('Action Input: {"query": "x"}\nAction: search', "input_before_action"),
        ("Action:\nAction Input: {}", "missing_tool"),
        ("Action: search", "missing_input"),
        ('Action: search\nFinal Answer: x\nAction Input: {"query": "x"}', "missing_input"),
    ],
)
def test_malformed_replies_name_their_problem(
    text: str, kind: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    parsed = parse_reply(text, schemas)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == kind


# -- the action's tool -----------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "search",
        "`search`",
        '"search"',
        "'search'",
        "**search**",
        "[search]",
        "Search",
        "SEARCH",
        "search.",
        "search (to find out)",
    ],
)
def test_tool_names_are_cleaned_and_resolved(
    name: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    parsed = parse_reply(f'Action: {name}\nAction Input: {{"query": "x"}}', schemas)
    assert parsed == ParsedAction("search", {"query": "x"})


@pytest.mark.parametrize("name", ["get-weather", "GetWeather", "get weather", "GET_WEATHER"])
def test_tool_names_resolve_when_normalised(
    name: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    parsed = parse_reply(f'Action: {name}\nAction Input: {{"city": "Oslo"}}', schemas)
    assert parsed == ParsedAction("get_weather", {"city": "Oslo"})


def test_an_unknown_tool_gets_the_closest_name(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    parsed = parse_reply('Action: get_wether\nAction Input: {"city": "Oslo"}', schemas)
    assert isinstance(parsed, FormatProblem)
    assert (parsed.kind, parsed.tool, parsed.suggestion) == (
        "unknown_tool",
        "get_wether",
        "get_weather",
    )


def test_only_a_unique_match_resolves() -> None:
    tools = [ollm.ToolSchema("Search"), ollm.ToolSchema("search_web"), ollm.ToolSchema("SEARCH")]
    assert resolve_tool("Search", tools)[0] == tools[0]  # exact wins
    found, suggestion = resolve_tool("search", tools)  # two case-insensitive matches
    assert found is None
    assert suggestion in ("Search", "SEARCH")
    assert resolve_tool("search-web", tools)[0] == tools[1]  # normalised, unique


@pytest.mark.parametrize(
    "line",
    [
        'Action: search({"query": "ollm"})',
        'Action: search {"query": "ollm"}',
        'Action: `search({"query": "ollm"})`',
        'Action: search(query="ollm")',
        "Action: search(query='ollm')",
        'Action: search("ollm")',
        'Action: search\n{"query": "ollm"}',
    ],
)
def test_inline_call_syntax(line: str, schemas: tuple[ollm.ToolSchema, ...]) -> None:
    assert parse_reply(line, schemas) == ParsedAction("search", {"query": "ollm"})


def test_an_inline_call_to_a_tool_without_arguments(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    assert parse_reply("Action: current_time()", schemas) == ParsedAction("current_time", {})


OWLS = {"query": "owls"}
_NAME_100 = "y" * 100


def _tools(*names: str) -> tuple[ollm.ToolSchema, ...]:
    """Tools that take what ``search`` takes, under these names."""
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}}
    return tuple(ollm.ToolSchema(name=name, parameters=parameters) for name in names)


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
    ("name", "shown"), [(_NAME_100, _NAME_100), ("y" * 101, _NAME_100 + "...")]
)
def test_an_unknown_name_on_the_action_line_is_shown_up_to_100_characters(
    name: str, shown: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    parsed = parse_reply(f"Action: {name}\nAction Input: {{}}", schemas)
    assert isinstance(parsed, FormatProblem)
    assert (parsed.kind, parsed.detail, parsed.tool) == (
        "unknown_tool",
        f"there is no tool named {shown!r}",
        shown,
    )


# -- the action's input ----------------------------------------------------------------


@pytest.mark.parametrize(
    "written",
    [
        '{"city": "Paris"}',
        '```json\n{"city": "Paris"}\n```',
        '```\n{"city": "Paris"}\n```',
        '`{"city": "Paris"}`',
        '{"city": "Paris"} I hope this helps!',
        'here it is: {"city": "Paris"}',
        "{'city': 'Paris'}",
        "{'city': 'Paris',}",
        '{\n  "city": "Paris",\n}',
        '{"city": "Paris", "units": null}'.replace("null", '"celsius"'),
    ],
)
def test_action_input_forms(written: str, schemas: tuple[ollm.ToolSchema, ...]) -> None:
    parsed = parse_reply(f"Action: get_weather\nAction Input: {written}", schemas)
    assert isinstance(parsed, ParsedAction)
    assert parsed.args["city"] == "Paris"


def test_python_literals_become_json_values(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    tools = (
        ollm.ToolSchema(
            "set",
            "Set flags.",
            {
                "type": "object",
                "properties": {
                    "on": {"type": "boolean"},
                    "off": {"type": "boolean"},
                    "nothing": {"type": "null"},
                    "items": {"type": "array"},
                },
            },
        ),
    )
    parsed = parse_reply(
        "Action: set\nAction Input: {'on': True, 'off': false, 'nothing': None, 'items': (1, 2)}",
        tools,
    )
    assert parsed == ParsedAction(
        "set", {"on": True, "off": False, "nothing": None, "items": [1, 2]}
    )


def test_bad_json_names_the_decoder_position(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    parsed = parse_reply('Action: get_weather\nAction Input: {"city": Paris}', schemas)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "bad_input"
    assert "Expecting value" in parsed.detail
    assert "line 1, column 10" in parsed.detail


def test_unclosed_json_is_rejected(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    parsed = parse_reply('Action: get_weather\nAction Input: {"city": "Paris"', schemas)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "bad_input"


@pytest.mark.parametrize(
    ("written", "what"),
    [
        ('{"units": "kelvin"}', "missing required field `city`"),
        ('{"city": 7}', "Expected `string`, got `int` - at `$.city`"),
        ("[1, 2]", "not a list"),
        ('{"city": "Paris", "units": 5}', "got `int` - at `$.units`"),
        ('{"city": NaN}', "NaN"),
    ],
)
def test_arguments_are_checked_against_the_schema(
    written: str, what: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    parsed = parse_reply(f"Action: get_weather\nAction Input: {written}", schemas)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "bad_input"
    assert what in parsed.detail


def test_numbers_written_as_strings_pass_as_natively() -> None:
    tools = (
        ollm.ToolSchema(
            "add",
            "Add.",
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        ),
    )
    assert parse_reply('Action: add\nAction Input: {"a": "5"}', tools) == ParsedAction(
        "add", {"a": "5"}
    )


@pytest.mark.parametrize("written", ["what is ollm", '"what is ollm"', "what is ollm\nmore prose"])
def test_a_plain_string_fits_a_tool_with_one_required_string(
    written: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    parsed = parse_reply(f"Action: search\nAction Input: {written}", schemas)
    assert parsed == ParsedAction("search", {"query": "what is ollm"})


def test_a_plain_string_does_not_fit_other_tools() -> None:
    tools = (
        ollm.ToolSchema(
            "route",
            "Route.",
            {
                "type": "object",
                "properties": {"start": {"type": "string"}, "end": {"type": "string"}},
                "required": ["start", "end"],
            },
        ),
    )
    parsed = parse_reply("Action: route\nAction Input: Paris to Rome", tools)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "bad_input"
    assert '{"start": "...", "end": "..."}' in parsed.detail


@pytest.mark.parametrize("written", ["", "{}", "None", "null"])
def test_no_input_fits_a_tool_without_required_arguments(
    written: str, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    parsed = parse_reply(f"Action: current_time\nAction Input: {written}", schemas)
    assert parsed == ParsedAction("current_time", {})


def test_thoughts_may_come_between_action_and_input(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    text = 'Action: search\nThought: with a good query\nAction Input: {"query": "q"}'
    assert parse_reply(text, schemas) == ParsedAction("search", {"query": "q"})


# -- think blocks ----------------------------------------------------------------------


def test_think_blocks_are_removed_before_parsing(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    text = (
        "<think>Maybe Final Answer: no.\nAction: search</think>\n"
        "Thought: I know.\nFinal Answer: yes"
    )
    assert parse_reply(text, schemas) == ParsedAnswer("yes", "I know.")


def test_an_unclosed_think_block_is_thinking_to_the_end(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    assert parse_reply("Final Answer: yes\n  <think>but maybe no", schemas) == ParsedAnswer("yes")
    parsed = parse_reply("<think>I will reason forever", schemas)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "empty"


def test_a_think_tag_inside_a_line_is_text(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    assert parse_reply("Final Answer: write <think> first", schemas) == ParsedAnswer(
        "write <think> first"
    )
    parsed = parse_reply('Action: search\nAction Input: {"query": "<think>"}', schemas)
    assert parsed == ParsedAction("search", {"query": "<think>"})


def test_a_closing_tag_alone_makes_what_came_before_it_thinking(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    text = "The user wants a number, let me think.</think>\nFinal Answer: 4"
    assert parse_reply(text, schemas) == ParsedAnswer("4")


def test_a_closing_tag_alone_after_a_marker_is_text(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    text = "The user wants a number.\nAnswer: 3?</think>\nFinal Answer: 4"
    assert parse_reply(text, schemas) == ParsedAnswer(
        "3?</think>\nFinal Answer: 4", "The user wants a number."
    )


def test_an_answer_that_mentions_the_closing_tag_keeps_it(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    parsed = parse_reply("Final Answer: close it with </think> like this", schemas)
    assert parsed == ParsedAnswer("close it with </think> like this")
    parsed = parse_reply('Action: search\nAction Input: {"query": "</think>"}', schemas)
    assert parsed == ParsedAction("search", {"query": "</think>"})


# -- a reply wrapped in a code fence ---------------------------------------------------


def test_a_fenced_reply_loses_only_its_closing_fence(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    text = "```\nThought: easy\nFinal Answer: 42\n```\n"
    assert parse_reply(text, schemas) == ParsedAnswer("42", "easy")
    text = "```\nThought: x\nFinal Answer: here:\n```py\nx = 1\n```\n```"
    assert parse_reply(text, schemas) == ParsedAnswer("here:\n```py\nx = 1\n```", "x")


def test_a_code_block_in_the_answer_keeps_its_fences(
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    text = "Thought: x\nFinal Answer: run:\n```\nls\n```"
    assert parse_reply(text, schemas) == ParsedAnswer("run:\n```\nls\n```", "x")
    text = "```\nThought: x\nFinal Answer: run:\n```sh\nls\n```"
    assert parse_reply(text, schemas) == ParsedAnswer("run:\n```sh\nls\n```", "x")


def test_a_fenced_action_is_parsed(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    text = '```\nThought: look\nAction: search\nAction Input: {"query": "q"}\n```'
    assert parse_reply(text, schemas) == ParsedAction("search", {"query": "q"}, "look")


def test_an_ambiguous_name_says_what_it_could_mean() -> None:
    tools = [ollm.ToolSchema("Search"), ollm.ToolSchema("SEARCH")]
    parsed = parse_reply("Action: search\nAction Input: {}", tools)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "unknown_tool"
    assert parsed.detail == "the tool name 'search' could mean Search or SEARCH"


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
def test_only_fence_lines_count_for_the_closing_fence(
    reply: str, parsed: ParsedAnswer, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    assert parse_reply(reply, schemas) == parsed
