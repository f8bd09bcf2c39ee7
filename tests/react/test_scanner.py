"""StreamScanner on its own (it is public): exactly what it shows, chunk by chunk."""

from __future__ import annotations

import pytest

from ollm_react import StreamScanner
from ollm_react._parser import ParsedAnswer, parse_reply

from .conftest import stream_scan


def shown(chunks: list[str]) -> list[tuple[str, str]]:
    return stream_scan(chunks)[0]


def streamed(chunks: list[str]) -> dict[str, str]:
    """What a scanner shows for these chunks, joined by kind."""
    kinds: dict[str, str] = {}
    for kind, text in shown(chunks):
        kinds[kind] = kinds.get(kind, "") + text
    return kinds


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
    assert isinstance(parse_reply(reply), ParsedAnswer) is not tag_is_text


# -- wherever the chunks fall ------------------------------------------------------------


# chunks -> what is shown, merged by kind
CHUNKED: list[tuple[list[str], list[tuple[str, str]]]] = [
    # a marker in the middle of a line: shown when the reply ends, as the batch parser
    # reads it (the answer after it), wherever the chunks fall
    (["The label reads ", "Final Answer: 42"], [("text", "42")]),
    (list("The label reads Final Answer: 42"), [("text", "42")]),
    # one trailing space at the end of a chunk is held, and dropped at the end
    (["Final Answer: 4", "2 "], [("text", "42")]),
    (["Final Answer: 4", "2 ", "x"], [("text", "42 x")]),
    # a thought shown chunk by chunk still ends its line before the next one
    (
        ["Thought: a", "bc", "\nThought: d\nFinal Answer: e"],
        [("thinking", "abc\nd"), ("text", "e")],
    ),
    # "```py" followed by more words is no fence: the answer keeps its own fence
    (
        ["```py", " is not a fence", "\nThought: x\nFinal Answer: a\n```"],
        [("thinking", "```py is not a fence\nx"), ("text", "a\n```")],
    ),
]


@pytest.mark.parametrize(("chunks", "expected"), CHUNKED, ids=lambda x: repr(x)[:40])
def test_what_the_stream_scanner_shows_wherever_the_chunks_fall(
    chunks: list[str], expected: list[tuple[str, str]]
) -> None:
    merged, scanner = stream_scan(chunks)
    assert merged == expected
    assert scanner.stop is None
    parsed = parse_reply("".join(chunks), ())
    assert isinstance(parsed, ParsedAnswer)
    assert parsed.answer == "".join(text for kind, text in merged if kind == "text")


def test_thinking_and_text_of_one_chunk_stay_apart() -> None:
    """A thought whose last word is "text" is not merged into the answer after it."""
    scanner = StreamScanner()
    assert scanner.feed("Thought: text\nFinal Answer: 42") == [
        ("thinking", "text"),
        ("text", "42"),
    ]
    scanner = StreamScanner()
    assert scanner.feed("Thought: thinking\nThought: more") == [("thinking", "thinking\nmore")]


def test_a_second_end_shows_nothing_more() -> None:
    """A caller may end a scanner twice (a cleanup path): the second end adds nothing."""
    for chunks in (["Thought: ok\nFinal An"], ["Hello"], ["Final Answer: 42\n```"]):
        scanner = StreamScanner()
        for chunk in chunks:
            scanner.feed(chunk)
        assert scanner.end()
        assert scanner.end() == []
