"""A reply that copies a template's placeholder is a failed step, never the answer
(issue 44: a 270M model answered ``<the answer for the user>``, and ollm showed it)."""

from __future__ import annotations

import re
from typing import Any

import pytest

import ollm
from ollm_react import (
    FormatProblem,
    JsonReActStrategy,
    ParsedAnswer,
    build_instructions,
    parse_reply,
)
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "reply",
    [
        "Thought: done.\nFinal Answer: <the answer for the user>",
        "Final Answer: <your answer for the user>",
        "Final Answer:   < your final answer >  ",
        # no marker at all: the implicit answer is the placeholder too
        "<the answer for the user>",
        # the instructions' own words for the answer, copied (Gemma 3 270M did)
        "Final Answer: the answer itself, written out for the user.",
        "Final Answer: The answer itself",
        "Thought: ok.\nFinal Answer: written out for the user!",
    ],
)
def test_a_placeholder_answer_is_a_problem(reply: str) -> None:
    parsed = parse_reply(reply)
    assert isinstance(parsed, FormatProblem)
    assert parsed.kind == "placeholder"
    assert "placeholder" in parsed.detail


@pytest.mark.parametrize(
    "answer",
    [
        *("391", "<b>", "Use <br> for a break.", "<3 you", "a < b and c > d", "<tag>"),
        *(
            "For the user: 391.",
            "The answer is 391.",
            "Itself.",
            "The answer.",
            "the user is right",
        ),
    ],
)
def test_answers_with_angle_brackets_stay_answers(answer: str) -> None:
    parsed = parse_reply(f"Final Answer: {answer}")
    assert parsed == ParsedAnswer(answer)


def test_the_instructions_hold_no_copyable_placeholder(schemas: Any) -> None:
    for example in (False, True):
        text = build_instructions(schemas, worked_example=example)
        assert "<" not in text
        assert ">" not in text
    # json-react's: the answer's place in the JSON holds no words to copy.
    text = JsonReActStrategy().prepare(ollm.ProviderRequest("m", (), tools=schemas)).system_prompt
    assert text is not None
    assert "final_answer" in text
    assert not re.search(r'"final_answer":\s*[^"\s]', text)


@pytest.mark.parametrize(
    "placeholder", ["<the answer for the user>", "the answer itself, written out for the user."]
)
async def test_a_placeholder_reply_gets_a_correction_and_the_real_answer_counts(
    registries: ollm.Registries, tools: Any, collect: Any, placeholder: str
) -> None:
    provider = ScriptedProvider(
        Reply(f"Thought: easy.\nFinal Answer: {placeholder}"),
        Reply("Thought: easy.\nFinal Answer: 391"),
    )
    chat = ollm.ChatClient(registries, provider=provider, tools=tools, tool_strategy="react")
    events = await collect(chat.chat("What is 17 * 23?"))

    assert events[-1].reason == "stop"
    assert not [e for e in events if isinstance(e, ollm.ErrorEvent)]
    correction = provider.requests[1].messages[-1]
    assert correction.role == "user"
    assert "placeholder" in correction.text
    assert "Write the real answer" in correction.text
    assert chat.conversation.messages[-1] == ollm.Message.assistant("391", thinking="easy.")
    # Nothing of the placeholder reached the screen.
    shown = "".join(e.text for e in events if isinstance(e, ollm.TextEvent))
    assert shown == "391"


def test_a_long_answer_is_never_a_placeholder() -> None:
    """A stream holds an undecided answer back: never more than a short one."""
    long = "<" + "the answer " * 30 + ">"
    assert parse_reply(f"Final Answer: {long}") == ParsedAnswer(long)
    assert isinstance(parse_reply("Final Answer: <the answer for the user>"), FormatProblem)
