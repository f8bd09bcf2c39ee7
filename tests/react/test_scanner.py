"""StreamScanner on its own (it is public): exactly what it shows, chunk by chunk."""

from __future__ import annotations

import pytest

from ollm_react import StreamScanner


def shown(chunks: list[str]) -> list[tuple[str, str]]:
    scanner = StreamScanner()
    outputs = [out for chunk in chunks for out in scanner.feed(chunk)] + scanner.end()
    merged: list[tuple[str, str]] = []
    for kind, text in outputs:
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + text)
        else:
            merged.append((kind, text))
    return merged


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
