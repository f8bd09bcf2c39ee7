"""What the model reads: instructions, Observations, the history, the text request, and
every correction and the wrap-up request word for word."""

from __future__ import annotations

import datetime
import json

import pytest

import ollm
from ollm_react import (
    FormatProblem,
    ReActStrategy,
    build_instructions,
    feedback,
    parse_reply,
    render_messages,
    render_observation,
    wrap_up_prompt,
)


def test_instructions_list_every_tool_exactly(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    text = build_instructions(schemas)
    for schema in schemas:
        assert f"- {schema.name}: {schema.description}" in text
        assert json.dumps(schema.parameters, ensure_ascii=False) in text
    assert "gives the tool name (one of: get_weather, search, current_time)" in text
    # No template line with a placeholder a small model would copy as its answer.
    assert "<" not in text
    assert "Final Answer:" in text
    assert "no code fences" in text
    assert 'Never write "Observation:" yourself' in text
    assert "One Action per reply" in text
    assert "Example" not in text


def test_the_worked_example_is_optional(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    text = build_instructions(schemas, worked_example=True)
    assert "made-up tool" in text
    # The example calls the first real tool (a tiny model copies the example's tool
    # name), with the shape of its arguments, written as the turns of a transcript.
    assert '\nAction: get_weather\nAction Input: {"city": "..."}\n' in text
    assert "\nUser: Observation: " in text
    assert text.startswith(build_instructions(schemas))


@pytest.mark.parametrize(
    ("choice", "rule"),
    [("required", "Use at least one tool"), ("search", "Use the tool search"), ("auto", None)],
)
def test_tool_choice_becomes_a_rule(
    choice: str, rule: str | None, schemas: tuple[ollm.ToolSchema, ...]
) -> None:
    text = build_instructions(schemas, tool_choice=choice)
    if rule is None:
        assert "before you give the Final Answer" not in text
    else:
        assert rule in text


@pytest.mark.parametrize(
    ("content", "is_error", "shown"),
    [
        ('{"temperature": 21}', False, 'Observation: {"temperature": 21}'),
        ('  {"a":[1,2]}\n', False, 'Observation: {"a": [1, 2]}'),
        ("42", False, "Observation: 42"),
        ('"quoted"', False, 'Observation: "quoted"'),
        ("It is sunny.", False, 'Observation: "It is sunny."'),
        ('line one\nline "two"', False, 'Observation: "line one\\nline \\"two\\""'),
        ("", False, 'Observation: ""'),
        ("NaN", False, 'Observation: "NaN"'),
        ("1e999", False, 'Observation: "1e999"'),
        ("Tool failed: boom", True, 'Observation: {"error": "Tool failed: boom"}'),
        ("Zürich", False, 'Observation: "Zürich"'),
        ('{"città": "Roma"}', False, 'Observation: {"città": "Roma"}'),
        ("échec: 404", True, 'Observation: {"error": "échec: 404"}'),
        # only JSON's whitespace is around JSON; other text stays text, whatever it holds
        ("\x0c42", False, 'Observation: "\\f42"'),
        ("\u00a01\u00a0", False, 'Observation: "\u00a01\u00a0"'),
        ("X1", False, 'Observation: "X1"'),
        ("-Infinity", False, 'Observation: "-Infinity"'),
        ("[NaN]", False, 'Observation: "[NaN]"'),
    ],
)
def test_observations_are_json(content: str, is_error: bool, shown: str) -> None:
    assert render_observation(content, is_error=is_error) == shown


def test_a_result_is_not_an_error_unless_said() -> None:
    assert render_observation('{"a": 1}') == 'Observation: {"a": 1}'


def test_the_history_is_rendered_canonically() -> None:
    call = ollm.ToolCall("react_1", "get_weather", {"city": "Zürich"})
    history = (
        ollm.Message.user("Weather in Zürich?"),
        ollm.Message.assistant("", tool_calls=(call,), thinking="I need the weather."),
        ollm.Message.tool('{"sky": "sunny"}', call=call),
        ollm.Message.tool("boom", call=ollm.ToolCall("react_2", "search"), is_error=True),
        ollm.Message.assistant("It is sunny.", thinking="Done."),
        ollm.Message.user("Observation: Error: your reply could not be used."),
        ollm.Message.assistant("Thought: hmm\nAction: search"),
        ollm.Message.assistant("It was cut sho", incomplete=True),
        ollm.Message.assistant("No thought here."),
    )
    texts = [(m.role, m.text) for m in render_messages(history)]
    assert texts == [
        ("user", "Weather in Zürich?"),
        (
            "assistant",
            'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Zürich"}',
        ),
        ("user", 'Observation: {"sky": "sunny"}'),
        ("user", 'Observation: {"error": "boom"}'),
        ("assistant", "Thought: Done.\nFinal Answer: It is sunny."),
        ("user", "Observation: Error: your reply could not be used."),
        ("assistant", "Thought: hmm\nAction: search"),
        ("assistant", "It was cut sho"),
        ("assistant", "Final Answer: No thought here."),
    ]
    assert all(not m.tool_calls and m.thinking is None for m in render_messages(history))


def test_images_stay_on_their_user_turn() -> None:
    image = ollm.ImagePart(b"\x89PNG", "image/png")
    message = ollm.Message.user("What is this?", images=(image,))
    assert render_messages((message,)) == (message,)


def test_the_text_request(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    request = ollm.ProviderRequest(
        model="tiny",
        messages=(ollm.Message.user("hi"),),
        system_prompt="You are a pirate.",
        tools=schemas,
        tool_choice="required",
        options=ollm.GenerationOptions(temperature=0.1, stop=("<|eot|>",)),
        response_format="json",
        think=False,
    )
    text = ReActStrategy().text_request(request)
    assert text.tools == ()
    assert text.model == "tiny"
    assert text.think is False
    assert text.response_format is None
    assert text.options.temperature == 0.1
    assert text.options.stop == ("<|eot|>", "\nObservation:")
    assert text.system_prompt == (
        build_instructions(schemas, tool_choice="required") + "\n\nYou are a pirate."
    )
    assert text.messages == (ollm.Message.user("hi"),)


def test_the_stop_sequence_is_added_once(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    request = ollm.ProviderRequest(
        model="m",
        messages=(),
        tools=schemas,
        options=ollm.GenerationOptions(stop=("\nObservation:",)),
    )
    assert ReActStrategy().text_request(request).options.stop == ("\nObservation:",)
    bare = ollm.ProviderRequest(model="m", messages=(), tools=schemas)
    text = ReActStrategy(worked_example=True).text_request(bare)
    assert text.options.stop == ("\nObservation:",)
    assert text.system_prompt == build_instructions(schemas, worked_example=True)


def test_feedback_names_the_problem_and_both_shapes(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    parsed = parse_reply('Action: get_weather\nAction Input: {"city": Paris}', schemas)
    assert isinstance(parsed, FormatProblem)
    text = feedback(parsed, schemas)
    assert text.startswith("Observation: Error:")
    assert "Expecting value at line 1, column 10" in text
    assert "Action: get_weather\n" in text
    assert 'Action Input: {"city": "..."}' in text
    assert "starts with Final Answer: and gives the answer itself" in text
    assert "<your" not in text


def test_unknown_tool_feedback_lists_the_tools(schemas: tuple[ollm.ToolSchema, ...]) -> None:
    parsed = parse_reply('Action: weather\nAction Input: {"city": "Oslo"}', schemas)
    assert isinstance(parsed, FormatProblem)
    text = feedback(parsed, schemas)
    assert "there is no tool named 'weather'" in text
    assert "Did you mean get_weather?" in text
    assert "The tools are: get_weather, search, current_time." in text
    assert "gives the tool name (one of: get_weather, search, current_time)" in text


# -- word for word: every correction, the wrap-up request, Observations, the history ----

MISSING_INPUT = "Action: search"
THOUGHT = "Thought: Paris is in France."
ALL_TOOLS = "get_weather, search, current_time"
EXAMPLE_Q = '{"q": "..."}'


ANSWER_SHAPE = (
    "To answer, write a line that starts with Thought: and gives your short reasoning, "
    "then a line that starts with Final Answer: and gives the answer itself."
)


def shapes(action: str = ALL_TOOLS, arguments: str | None = None) -> str:
    """The two reply shapes every correction ends with: ``action`` is the tool of the
    problem (with its ``arguments``), else the names of all the tools."""
    if arguments is None:
        use = (
            "To use a tool, write a Thought line, then a line that starts with Action: and "
            f"gives the tool name (one of: {action}), then a line that starts with Action "
            "Input: and gives the arguments as one JSON object."
        )
    else:
        use = (
            f"To use {action}, write a Thought line, then these two lines (with the "
            f"arguments your question needs):\nAction: {action}\nAction Input: {arguments}"
        )
    return f"Reply in exactly one of these two shapes.\n{use}\n{ANSWER_SHAPE}"


UNUSABLE = "Observation: Error: your reply could not be used:"


@pytest.mark.parametrize(
    ("reply", "first_line", "action", "arguments"),
    [
        (
            "",
            f"{UNUSABLE} the reply was empty. Write a Thought, then an Action with its "
            "Action Input, or a Final Answer.",
            ALL_TOOLS,
            None,
        ),
        (
            THOUGHT,
            f"{UNUSABLE} the reply had a Thought but no Action and no Final Answer. "
            "After the Thought, write an Action with its Action Input, or a Final Answer.",
            ALL_TOOLS,
            None,
        ),
        (
            "Final Answer:",
            f"{UNUSABLE} the Final Answer was empty. Write the answer itself after "
            "'Final Answer:'.",
            ALL_TOOLS,
            None,
        ),
        (
            'Action Input: {"query": "x"}',
            f"{UNUSABLE} the reply had an Action Input but no Action line before it. "
            "Write the Action line (the tool name) before its Action Input.",
            ALL_TOOLS,
            None,
        ),
        (
            "Action:",
            f"{UNUSABLE} the Action line had no tool name. Write the tool name after 'Action:'.",
            ALL_TOOLS,
            None,
        ),
        (
            MISSING_INPUT,
            f"{UNUSABLE} the Action had no Action Input line after it. After the Action "
            "line, write 'Action Input:' and the arguments as JSON (use {} when the tool "
            "takes no arguments).",
            "search",
            '{"query": "..."}',
        ),
        (
            'Action: get_weather\nAction Input: {"city": 3}',
            f"{UNUSABLE} Action Input does not fit the arguments of get_weather: Expected "
            "`string`, got `int` - at `$.city`. Write the Action Input again as one JSON "
            "object with double quotes.",
            "get_weather",
            '{"city": "..."}',
        ),
        (
            'Action: serch\nAction Input: {"query": "x"}',
            "Observation: Error: there is no tool named 'serch'. Did you mean search? The "
            "tools are: get_weather, search, current_time. Use one of these names exactly.",
            ALL_TOOLS,
            None,
        ),
        (
            "Action: launch_rocket\nAction Input: {}",
            "Observation: Error: there is no tool named 'launch_rocket'. The tools are: "
            "get_weather, search, current_time. Use one of these names exactly.",
            ALL_TOOLS,
            None,
        ),
    ],
)
def test_every_correction_word_for_word(
    reply: str,
    first_line: str,
    action: str,
    arguments: str | None,
    schemas: tuple[ollm.ToolSchema, ...],
) -> None:
    parsed = parse_reply(reply, schemas)
    assert isinstance(parsed, FormatProblem)
    assert feedback(parsed, schemas) == f"{first_line}\n{shapes(action, arguments)}"


@pytest.mark.parametrize(
    ("reply", "first_line"),
    [
        (
            "Action: launch_rocket\nAction Input: {}",
            "Observation: Error: there is no tool named 'launch_rocket'. The tools are: "
            "(none). Use one of these names exactly.",
        ),
        (
            "Action:",
            f"{UNUSABLE} the Action line had no tool name. Write the tool name after 'Action:'.",
        ),
    ],
)
def test_a_correction_without_tools_says_there_are_none(reply: str, first_line: str) -> None:
    parsed = parse_reply(reply, ())
    assert isinstance(parsed, FormatProblem)
    assert feedback(parsed, ()) == f"{first_line}\n{shapes('(none)')}"


def test_a_correction_quotes_the_models_own_words_as_written() -> None:
    # A strict schema names the unknown field as the model wrote it, " \n" included
    # (the correction was once tidied by replacing " \n" in the whole text).
    strict = ollm.ToolSchema(
        "lookup",
        "Look something up.",
        {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False},
    )
    parsed = parse_reply('Action: lookup\nAction Input: {"q": "x", "a \\n": 1}', (strict,))
    assert isinstance(parsed, FormatProblem)
    first_line = (
        f"{UNUSABLE} Action Input does not fit the arguments of lookup: Object contains "
        "unknown field `a \n` (known: `q`) - at `$`. Write the Action Input again as one "
        "JSON object with double quotes."
    )
    assert feedback(parsed, (strict,)) == f"{first_line}\n{shapes('lookup', EXAMPLE_Q)}"


def test_the_wrap_up_request_word_for_word() -> None:
    assert wrap_up_prompt() == (
        "Observation: You have used all the tool calls allowed for this question. "
        "Do not use any tool now. Reply with your best answer from what you already "
        f"know. {ANSWER_SHAPE}"
    )


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        # A result is not an error unless the caller says so.
        (render_observation("It is sunny."), 'Observation: "It is sunny."'),
        (
            render_observation("Zürich: keine Daten", is_error=True),
            'Observation: {"error": "Zürich: keine Daten"}',
        ),
        (render_observation('{"city": "Zürich"}'), 'Observation: {"city": "Zürich"}'),
        # Only JSON's whitespace is stripped before reading a result as JSON.
        (render_observation("\f42"), 'Observation: "\\f42"'),
        (render_observation("\u00a042"), 'Observation: "\u00a042"'),
        (render_observation("X42X"), 'Observation: "X42X"'),
    ],
)
def test_observations_beyond_the_table(shown: str, expected: str) -> None:
    assert shown == expected


def test_the_history_without_a_thought_cut_short_or_with_arguments_that_are_not_json() -> None:
    call = ollm.ToolCall("c1", "remind", {"day": datetime.date(2024, 5, 1)})
    rendered = render_messages(
        (
            ollm.Message.assistant("", tool_calls=(call,)),
            ollm.Message.assistant("It was cut sho", incomplete=True),
        )
    )
    assert rendered == (
        ollm.Message.assistant('Action: remind\nAction Input: {"day": "2024-05-01"}'),
        ollm.Message.assistant("It was cut sho", incomplete=True),
    )
