"""StreamScanner on its own (it is public): exactly what it shows, chunk by chunk."""

from __future__ import annotations

import pytest

from ollm_react import StreamScanner
from ollm_react._parser import ParsedAnswer, parse_reply

from .conftest import stream_scan


def shown(chunks: list[str]) -> list[tuple[str, str]]:
    return stream_scan(chunks)[0]


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_an_implicit_answer_is_shown_when_the_reply_ends(size: int) -> None:
    text = "  Paris is the capital.\n"
    assert shown([text[i : i + size] for i in range(0, len(text), size)]) == [
        ("text", "Paris is the capital.")
    ]


@pytest.mark.parametrize("size", [1, 4, 1000])
def test_text_before_an_orphan_closing_think_tag_is_thinking(size: int) -> None:
    text = "weighing it up</think>\nFinal Answer: 42"
    assert shown([text[i : i + size] for i in range(0, len(text), size)]) == [
        ("thinking", "weighing it up"),
        ("text", "42"),
    ]


def test_think_blocks_and_thoughts_are_thinking_on_their_own_lines() -> None:
    assert shown(["<think>plan</think>Thought: x\nFinal Answer: y"]) == [
        ("thinking", "plan\nx"),
        ("text", "y"),
    ]


def test_a_reply_cut_inside_a_marker_shows_the_partial_line_at_the_end() -> None:
    scanner = StreamScanner()
    assert scanner.feed("Thought: ok\nFinal An") == [("thinking", "ok")]
    assert scanner.end() == [("thinking", "\nFinal An")]


def test_the_text_after_the_stop_is_not_read() -> None:
    scanner = StreamScanner()
    scanner.feed("Final Answer: 42\nObservation: invented")
    assert scanner.stop == "observation"
    assert scanner.feed("more") == []


# reply -> (what is shown, merged by kind; where the scanner stopped; answering; in_action)
REPLIES: dict[str, tuple[list[tuple[str, str]], str | None, bool, bool]] = {
    # emphasis and space around a marker's colon belong to the marker, not to the text
    "**Final Answer:** 42": ([("text", "42")], None, True, False),
    "Final Answer: **42** is it": ([("text", "**42** is it")], None, True, False),
    "Thought: I know\n**Final Answer:**   _the_ answer  \n": (
        [("thinking", "I know"), ("text", "_the_ answer")],
        None,
        True,
        False,
    ),
    "Thought:**bold** x\nFinal Answer:`42`": (
        [("thinking", "**bold** x"), ("text", "`42`")],
        None,
        True,
        False,
    ),
    "**Thought:** x\n**Final Answer:** `42`": (
        [("thinking", "x"), ("text", "`42`")],
        None,
        True,
        False,
    ),
    # blank lines inside a thought or an answer are kept; trailing ones are not
    "Thought: a\n\n  \nstill a\nFinal Answer:\n\n b  \n\n c": (
        [("thinking", "a\n\n  \nstill a"), ("text", "b  \n\n c")],
        None,
        True,
        False,
    ),
    "Thought: a  \nThought: b\nFinal Answer: c": (
        [("thinking", "a\nb"), ("text", "c")],
        None,
        True,
        False,
    ),
    "Final Answer: a\n\n\n": ([("text", "a")], None, True, False),
    # a fenced reply: its closing fence is dropped, the answer's own fences kept
    "```\nThought: x\nFinal Answer: 42\n```": (
        [("thinking", "x"), ("text", "42")],
        None,
        True,
        False,
    ),
    "```\nThought: x\nFinal Answer: code:\n```py\nprint(1)\n```\n```": (
        [("thinking", "x"), ("text", "code:\n```py\nprint(1)\n```")],
        None,
        True,
        False,
    ),
    "```\nThought: x\nFinal Answer: a\n```\nb": (
        [("thinking", "x"), ("text", "a\n```\nb")],
        None,
        True,
        False,
    ),
    "Thought: x\nFinal Answer: a\n```\n": (
        [("thinking", "x"), ("text", "a\n```")],
        None,
        True,
        False,
    ),
    # text before the first marker is thinking (its fence lines are not)
    "I will search.\n```\nThought: a\nFinal Answer: b": (
        [("thinking", "I will search.\na"), ("text", "b")],
        None,
        True,
        False,
    ),
    "<think>deep</think>\nplan\nFinal Answer: x": (
        [("thinking", "deep\nplan"), ("text", "x")],
        None,
        True,
        False,
    ),
    # a second Final Answer is part of the first; anything else ends it
    "Final Answer: 42\nFinal Answer: 43": ([("text", "42\nFinal Answer: 43")], None, True, False),
    "Final Answer: 42\nThought: more": ([("text", "42")], "answer ended", True, False),
    # actions: stopped at the input's closing brace, or at what ends the action
    'Thought: a\nAction: search\nAction Input: {"q": {"r": 1}} tail': (
        [("thinking", "a")],
        "call closed",
        False,
        True,
    ),
    'Thought: a\nAction: search({"q": 1}) tail': ([("thinking", "a")], "call closed", False, True),
    "Thought: x\nAction: search(q=1)": ([("thinking", "x")], "call closed", False, True),
    'Action: search (  {"q": "}"}  ) after': ([], "call closed", False, True),
    'Thought: a\nAction Input: {"q": 1}\nmore': ([("thinking", "a")], "call closed", False, True),
    'Thought: a\nAction: search\nThought: b\nAction Input: {"q": 1}\nmore': (
        [("thinking", "a")],
        "call closed",
        False,
        True,
    ),
    "Action: search\nThought: hmm\nThought: more\nAction Input: {}": (
        [],
        "call closed",
        False,
        True,
    ),
    "Thought: a\nAction: search\nThought: b\nFinal Answer: no": (
        [("thinking", "a")],
        "action ended",
        False,
        True,
    ),
    "Action: search\nThought: hmm\nAction: other": ([], "action ended", False, True),
    "Action: search\nAction: other": ([], "action ended", False, True),
    'Action: search\nAction Input: {"q": 1}\nThought: x': ([], "call closed", False, True),
    'Action: search\nAction Input: {\n"q": 1\nThought: x': ([], "input ended", False, True),
    "Thought: a\nAction: search\nObservation: x": ([("thinking", "a")], "observation", False, True),
    'Action: search({"q": \nThought: x': ([], "action ended", False, True),
    'Action:{"action": "search", "action_input": {}} tail': ([], "call closed", False, True),
    # emphasis right after the colon is the marker's; what follows it is the answer's
    "**Final Answer:**Xavier": ([("text", "Xavier")], None, True, False),
    "*Final Answer:* **x**": ([("text", "**x**")], None, True, False),
    # fences: a code block before a fenced reply, and a thought that ends in a block
    "```\nplan\n```\nThought: x\nFinal Answer: a\n```": (
        [("thinking", "plan\nx"), ("text", "a\n```")],
        None,
        True,
        False,
    ),
    "```\nplan\n```\n```\nThought: x\nFinal Answer: a\n```": (
        [("thinking", "plan\nx"), ("text", "a")],
        None,
        True,
        False,
    ),
    "Thought: see\n```\nx\n```\nFinal Answer: y": (
        [("thinking", "see\n```\nx\n```"), ("text", "y")],
        None,
        True,
        False,
    ),
    # an orphan </think>: what came before is thinking, on its own line, without fences
    "plan</think>Final Answer: 42": ([("thinking", "plan"), ("text", "42")], None, True, False),
    "```\nplan</think>\nFinal Answer: 42\n```": (
        [("thinking", "plan"), ("text", "42\n```")],
        None,
        True,
        False,
    ),
    "```\nplan</think>```\nThought: a\nFinal Answer: 42\n```": (
        [("thinking", "plan\na"), ("text", "42")],
        None,
        True,
        False,
    ),
    "Thought: a</think>\nFinal Answer: b": (
        [("thinking", "a</think>"), ("text", "b")],
        None,
        True,
        False,
    ),
}


@pytest.mark.parametrize("size", [1, 2, 5, 10_000])
@pytest.mark.parametrize("reply", list(REPLIES))
def test_what_each_reply_shows_and_where_it_stops(reply: str, size: int) -> None:
    expected, stop, answering, in_action = REPLIES[reply]
    merged, scanner = stream_scan([reply[i : i + size] for i in range(0, len(reply), size)])
    assert (merged, scanner.stop) == (expected, stop)
    assert (scanner.answering, scanner.in_action, scanner.saw_marker) == (
        answering,
        in_action,
        True,
    )
    if answering:
        parsed = parse_reply(reply, ())
        assert isinstance(parsed, ParsedAnswer)
        assert parsed.answer == "".join(text for kind, text in merged if kind == "text")


@pytest.mark.parametrize("reply", ["hello <thi", "plan</thi", "hello <think>x"])
def test_an_unfinished_tag_at_the_end_is_part_of_an_implicit_answer(reply: str) -> None:
    merged, scanner = stream_scan(list(reply))
    assert (merged, scanner.stop, scanner.saw_marker) == ([("text", reply)], None, False)


@pytest.mark.parametrize(
    ("before", "closing"),
    [
        ('Action: search\nAction Input: (X) {"q": ")"', "}"),
        ("Action:(to find it) search(", ")"),
        ('Action: search({"q": "}"', "})"),
    ],
)
def test_a_call_closes_at_the_bracket_that_balances_its_opening(before: str, closing: str) -> None:
    scanner = StreamScanner()
    for char in before:
        scanner.feed(char)
    assert scanner.stop is None
    scanner.feed(closing)
    assert scanner.stop == "call closed"
