"""LineSplitter and EventSplitter at their edges: line ends, the last line, the exact limit.

The properties in test_streams.py hold the splitters to the reference on random input;
these pin what random input rarely reaches: CRs next to the newline, a stream that
ends mid-line, a line or event of exactly ``max_line`` bytes, and bytes that are not
UTF-8.
"""

from __future__ import annotations

import pytest

from ollm_http import EventSplitter, LineSplitter, LineTooLongError, ServerSentEvent

LINE_REFUSED = (
    "The server sent a line longer than 8 bytes; refusing it. If the replies really are "
    "that large, raise the line limit (Limits.max_line)."
)
EVENT_REFUSED = (
    "The server sent an event longer than 10 bytes; refusing it. If events really are that "
    "large, raise Limits.max_line."
)


def test_a_crlf_loses_its_cr_and_only_that_one() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a": 1}\r\n\r\nx\r\r\n') == [b'{"a": 1}', b"", b"x\r"]
    assert splitter.feed(b"split\r") == []
    assert splitter.feed(b"\nnext\n") == [b"split", b"next"]
    assert splitter.end() is None


@pytest.mark.parametrize(
    ("tail", "last"),
    [(b"tail", b"tail"), (b"tail\r", b"tail"), (b"tail\r\r", b"tail\r"), (b"\r", b"")],
)
def test_the_last_line_without_a_newline_is_given_at_the_end(tail: bytes, last: bytes) -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"first\n" + tail) == [b"first"]
    assert splitter.end() == last
    assert splitter.end() is None


def test_a_line_of_exactly_the_limit_is_kept_and_one_byte_more_is_refused() -> None:
    splitter = LineSplitter(max_line=8)
    assert splitter.feed(b"12345678\n") == [b"12345678"]
    # The same line in pieces, and another one started in the same block.
    assert splitter.feed(b"12345678") == []
    assert splitter.feed(b"\n") == [b"12345678"]
    assert splitter.feed(b"1234") == []
    assert splitter.feed(b"5678\nabcdefgh") == [b"12345678"]
    assert splitter.feed(b"\n") == [b"abcdefgh"]
    with pytest.raises(LineTooLongError) as whole:
        splitter.feed(b"123456789\n")
    assert whole.value.message == LINE_REFUSED
    assert whole.value.code == "BAD_RESPONSE"
    with pytest.raises(LineTooLongError) as piece:
        LineSplitter(max_line=8).feed(b"123456789")
    assert piece.value.message == LINE_REFUSED


def test_an_event_of_exactly_the_limit_is_kept_each_time() -> None:
    splitter = EventSplitter(max_event=10)
    # "data: 1234" is 10 bytes; the count starts again after each event.
    assert splitter.feed(b"data: 1234\n\n") == [ServerSentEvent(data="1234")]
    assert splitter.feed(b"data: 5678\n\n") == [ServerSentEvent(data="5678")]
    assert splitter.feed(b"id:1\ndata:1\n\n") == [ServerSentEvent(data="1", id="1")]


def test_an_event_one_byte_past_the_limit_is_refused() -> None:
    splitter = EventSplitter(max_event=10)
    assert splitter.feed(b"data: 12\n") == []
    with pytest.raises(LineTooLongError) as caught:
        splitter.feed(b"data:\n")
    assert caught.value.message == EVENT_REFUSED


def test_an_unfinished_event_at_the_end_is_dropped_without_error() -> None:
    splitter = EventSplitter()
    assert splitter.feed(b"data: one\n\ndata: tw") == [ServerSentEvent(data="one")]
    assert splitter.end() == []
    assert EventSplitter().end() == []


def test_an_unfinished_event_that_passes_the_limit_at_the_end_is_refused() -> None:
    splitter = EventSplitter(max_event=10)
    assert splitter.feed(b"data: 12\ndata") == []
    with pytest.raises(LineTooLongError) as caught:
        splitter.end()
    assert caught.value.message == EVENT_REFUSED


def test_bytes_that_are_not_utf8_become_replacement_characters() -> None:
    splitter = EventSplitter()
    events = splitter.feed(b"event: caf\xe9\ndata: \xff\xfeok\n\n")
    assert events == [ServerSentEvent(event="caf\ufffd", data="\ufffd\ufffdok")]


@pytest.mark.parametrize(
    "blocks",
    [
        # a CRLF cut between its CR and its LF is one line end
        [b"data: a\r", b"\ndata: b\r\n\r\n"],
        [b"data: a\r", b"\n", b"\r", b"\n"],
        # an LF that begins a block after a line without CR is a line end of its own
        [b"data: a", b"\n\r\n"],
        [b"data: a\ndata: b", b"\n\r"],
    ],
)
def test_line_ends_of_every_kind_wherever_the_blocks_are_cut(blocks: list[bytes]) -> None:
    data = b"".join(blocks).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    expected = "\n".join(line[6:] for line in data.decode().split("\n") if line)
    splitter = EventSplitter()
    events = [event for block in blocks for event in splitter.feed(block)]
    assert events == [ServerSentEvent(data=expected)]


def test_an_events_json_nested_too_deeply_is_a_value_error() -> None:
    from ollm_http import ServerSentEvent

    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ValueError, match="nested too deeply"):
        ServerSentEvent(data=deep).json()
    assert ServerSentEvent(data='{"a": [1]}').json() == {"a": [1]}
