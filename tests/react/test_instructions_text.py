"""The system prompt a model reads, word for word: every line of the protocol, each tool
with its description and JSON Schema as written (non-ASCII kept, values JSON cannot hold
shown as text), the rule for each tool choice, and the prompt built once while nothing
changes."""

from __future__ import annotations

import datetime

import pytest

import ollm
from ollm_react import ReActStrategy, build_instructions

from .conftest import asking

WEATHER = ollm.ToolSchema(
    name="meteo",
    description="  Le temps qu'il fait à une ville.  ",
    parameters={
        "type": "object",
        "properties": {
            "ville": {"type": "string", "default": "Zürich"},
            # a third party's schema may hold what JSON cannot: shown as its text
            "jour": {"type": "string", "examples": [datetime.date(2026, 11, 25)]},
        },
        "required": ["ville"],
    },
)
NOW = ollm.ToolSchema(name="now", description="", parameters={"type": "object"})

PROTOCOL = """\
You can use tools to answer. The tools are:

- meteo: Le temps qu'il fait à une ville.
  Arguments (JSON Schema): {"type": "object", "properties": {"ville": {"type": "string", \
"default": "Zürich"}, "jour": {"type": "string", "examples": ["2026-11-25"]}}, \
"required": ["ville"]}

- now: (no description)
  Arguments (JSON Schema): {"type": "object"}

To use a tool, reply with three lines, then stop: a line that starts with Thought: and \
gives your short reasoning, a line that starts with Action: and gives the tool name (one \
of: meteo, now), and a line that starts with Action Input: and gives the arguments as \
one JSON object. The tool's result comes back in the next message, on a line that starts \
with Observation:.

When you have what you need, or need no tool, reply with a line that starts with \
Thought: and gives your short reasoning, then a line that starts with Final Answer: and \
gives the answer itself, written out for the user.

Rules:
- One Action per reply; wait for its Observation before the next one.
- Action Input is plain JSON with double quotes: no code fences, no comments.
- Use a tool name exactly as listed.
- Never write "Observation:" yourself; it comes from the tool."""


def test_the_instructions_word_for_word() -> None:
    assert build_instructions((WEATHER, NOW)) == PROTOCOL


@pytest.mark.parametrize(
    ("choice", "rule"),
    [
        ("required", "- Use at least one tool before you give the Final Answer."),
        ("now", "- Use the tool now before you give the Final Answer."),
        ("auto", None),
        ("none", None),
        ("", None),
        # a tool that is not offered cannot be required
        ("ghost", None),
    ],
)
def test_each_tool_choice_in_words(choice: str, rule: str | None) -> None:
    expected = PROTOCOL if rule is None else f"{PROTOCOL}\n\n{rule}"
    assert build_instructions((WEATHER, NOW), tool_choice=choice) == expected


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_a_tool_named_like_a_choice_is_not_required_by_it(choice: str) -> None:
    tools = (ollm.ToolSchema(name=choice, description="d", parameters={"type": "object"}),)
    assert "before you give the Final Answer" not in build_instructions(tools, tool_choice=choice)


def test_the_prompt_is_built_once_while_nothing_changes() -> None:
    strategy = ReActStrategy()
    tools = (WEATHER, NOW)
    first = strategy.text_request(asking(tools, system_prompt="Be brief.")).system_prompt
    again = strategy.text_request(asking(tools, system_prompt="Be brief.")).system_prompt
    assert first == f"{PROTOCOL}\n\nBe brief."
    assert again is first
    # any change builds it anew
    required = strategy.text_request(asking(tools, tool_choice="required")).system_prompt
    assert required is not first
    assert required is not None
    assert required.endswith("- Use at least one tool before you give the Final Answer.")
    strategy.worked_example = True
    example = strategy.text_request(asking(tools, tool_choice="required")).system_prompt
    assert example is not required
    assert example == build_instructions(tools, worked_example=True, tool_choice="required")
