"""TextCallScanner on its own (it is public): the call shapes and separators each format
accepts, the space a list or a fence may hold before its call, a reply exactly 64 KiB
long, a bad ``<tool_call>`` block before a good one (found the same under every
chunking), and a second ``end()``."""

from __future__ import annotations

from typing import Any

import pytest

import ollm
from ollm_react import TextCallScanner

from .conftest import chunkings, weather_schema

CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
OSLO = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
PARIS = ("get_weather", {"city": "Paris"})
OSLO_CALL = ("get_weather", {"city": "Oslo"})


def flights_schema() -> ollm.ToolSchema:
    """A tool whose argument is an object (braces inside the arguments)."""
    return ollm.ToolSchema(
        name="find_flights",
        description="Flights on a route.",
        parameters={
            "type": "object",
            "properties": {
                "route": {
                    "type": "object",
                    "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
                    "required": ["from", "to"],
                }
            },
            "required": ["route"],
        },
    )


def xcode_schema() -> ollm.ToolSchema:
    """A tool whose name begins with a capital X."""
    return ollm.ToolSchema(
        name="Xcode_build", description="Build a project.", parameters={"type": "object"}
    )


SCHEMAS = (weather_schema(), flights_schema(), xcode_schema())


def scan(chunks: list[str]) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """The text a TextCallScanner shows for these chunks, and the calls it recovers."""
    scanner = TextCallScanner(SCHEMAS)
    outputs = [out for chunk in chunks for out in scanner.feed(chunk)] + scanner.end()
    text = "".join(out[1] for out in outputs if out[0] == "text")  # type: ignore[misc]
    calls = [call for out in outputs if out[0] == "calls" for call in out[1]]  # type: ignore[misc]
    return text, calls


# reply -> the calls recovered from it (none: the reply is shown as it was written)
RECOVERED: dict[str, list[tuple[str, dict[str, Any]]]] = {
    # a list may hold space before its first call, a fence space before its JSON
    f"[\n  {CALL}\n]": [PARIS],
    f"[ {CALL}, {OSLO} ]": [PARIS, OSLO_CALL],
    f"```json\n  {CALL}\n```": [PARIS],
    f"```json\n\n{CALL}\n```\n": [PARIS],
    # a fence that is not the whole reply is shown, whatever it holds
    f"```json\n{CALL}\n```\nThat is the call I would make.": [],
    f"```json\n{CALL}\nand no closing fence": [],
    # Llama: only space, newlines, ";" and "," between calls; the tag may be in an argument
    f"<|python_tag|>{CALL};{OSLO}": [PARIS, OSLO_CALL],
    f"<|python_tag|>{CALL}\n{OSLO}": [PARIS, OSLO_CALL],
    f"<|python_tag|>{CALL}X{OSLO}": [],
    f"<|python_tag|>{CALL} XX": [],
    '<|python_tag|>{"name": "get_weather", "parameters": {"city": "[TOOL_CALLS]"}}': [
        ("get_weather", {"city": "[TOOL_CALLS]"})
    ],
    # Mistral: one object, an empty segment, a name of any first letter, nested arguments
    f"[TOOL_CALLS]{CALL}": [PARIS],
    f"[TOOL_CALLS] {OSLO}[TOOL_CALLS]{CALL}": [OSLO_CALL, PARIS],
    '[TOOL_CALLS] [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}': [PARIS],
    "[TOOL_CALLS]Xcode_build[ARGS]{}": [("Xcode_build", {})],
    '[TOOL_CALLS]find_flights{"route": {"from": "Paris", "to": "Oslo"}}': [
        ("find_flights", {"route": {"from": "Paris", "to": "Oslo"}})
    ],
    # a bad <tool_call> block is text; the good one after it is still a call
    f"<tool_call>{{bad json}}</tool_call> then <tool_call>{CALL}</tool_call>": [PARIS],
    f"<tool_call>{CALL[:-1]}</tool_call><tool_call>{OSLO}</tool_call>\nDone.": [OSLO_CALL],
    f"<tool_call></tool_call><tool_call>{CALL}</tool_call>": [PARIS],
}
SHOWN = {
    f"<tool_call>{{bad json}}</tool_call> then <tool_call>{CALL}</tool_call>": (
        "<tool_call>{bad json}</tool_call> then "
    ),
    f"<tool_call>{CALL[:-1]}</tool_call><tool_call>{OSLO}</tool_call>\nDone.": (
        f"<tool_call>{CALL[:-1]}</tool_call>\nDone."
    ),
    f"<tool_call></tool_call><tool_call>{CALL}</tool_call>": "<tool_call></tool_call>",
}


@pytest.mark.parametrize("reply", list(RECOVERED), ids=lambda reply: reply[:50])
def test_what_each_reply_recovers_under_every_chunking(reply: str) -> None:
    expected = RECOVERED[reply]
    for chunks in chunkings(reply):
        text, calls = scan(chunks)
        assert calls == expected, chunks
        if reply in SHOWN:
            assert text == SHOWN[reply], chunks
        elif expected:
            assert text.strip() == "", chunks
        else:
            assert text == reply, chunks


def test_a_bad_block_is_shown_as_soon_as_its_closing_tag_comes() -> None:
    scanner = TextCallScanner(SCHEMAS)
    assert scanner.feed("Hm. <tool_call>{bad") == [("text", "Hm. ")]
    assert scanner.feed("}</tool_call> so I will ") == [
        ("text", "<tool_call>{bad}</tool_call> so I will ")
    ]
    assert scanner.feed(f"<tool_call>{CALL}</tool_call>") == [("calls", [PARIS], "hermes")]


@pytest.mark.parametrize("start", ["[1", "[ 7,", "[-", '[ "a'])
def test_a_list_that_cannot_hold_calls_is_shown_at_once(start: str) -> None:
    scanner = TextCallScanner(SCHEMAS)
    assert scanner.feed(start) == [("text", start)]


def test_a_bare_call_of_exactly_64_kib_is_a_call_and_one_byte_more_is_text() -> None:
    from ollm_react._recover import MAX_HELD  # the limit has no public name

    def city(size: int) -> str:
        return "P" * (size - len(CALL.replace("Paris", "")))

    def reply(size: int) -> str:
        return CALL.replace("Paris", city(size))

    exact = reply(MAX_HELD)
    assert len(exact) == MAX_HELD
    assert scan([exact]) == ("", [("get_weather", {"city": city(MAX_HELD)})])
    assert scan([exact[:1000], exact[1000:]])[1] == scan([exact])[1]
    over = reply(MAX_HELD + 1)
    assert scan([over]) == (over, [])


def test_a_second_end_shows_nothing_more() -> None:
    """A caller may end a scanner twice (a cleanup path): the second end adds nothing."""
    scanner = TextCallScanner(SCHEMAS)
    assert scanner.feed(CALL) == []
    assert scanner.end() == [("calls", [PARIS], "json")]
    assert scanner.end() == []
