"""Lines and Server-Sent Events out of a reply's byte blocks, in bounded memory.

A line split over many blocks is kept as a list of pieces and joined once, when it
ends, so a large line costs linear time, never quadratic; a line (or an SSE event)
past ``max_line`` bytes is refused as soon as it gets there.

The SSE field rules are the WHATWG ones as httpx-sse applies them (``data`` lines
joined by newlines, ``event``, ``id`` kept across events, ``retry``, comments), and a
differential test holds this decoder to httpx-sse's on arbitrary streams. It is
written here, not imported, because httpx-sse reads lines through httpx's decoder
with no bound on their length, and exposes its decoder only from a private module.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from ollm.errors import BadResponseError

__all__ = ["EventSplitter", "LineSplitter", "LineTooLongError", "ServerSentEvent"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One Server-Sent Event: its type (``message`` by default), data, last id, retry."""

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None

    def json(self) -> Any:
        """``data`` decoded as JSON; ``ValueError`` (``json.JSONDecodeError``) for anything
        that is not, JSON nested too deeply included (never a ``RecursionError``)."""
        try:
            return json.loads(self.data)
        except RecursionError:
            raise ValueError("the event's JSON is nested too deeply") from None


class _SSEDecoder:
    """Lines in, events out, by the WHATWG rules as httpx-sse applies them."""

    __slots__ = ("_data", "_event", "_last_id", "_retry")

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._last_id = ""
        self._retry: int | None = None

    def decode(self, line: str) -> ServerSentEvent | None:
        if not line:
            if not self._event and not self._data and not self._last_id and self._retry is None:
                return None
            event = ServerSentEvent(
                self._event or "message", "\n".join(self._data), self._last_id, self._retry
            )
            self._event = ""
            self._data = []
            self._retry = None  # the last id stays, as the rules say
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\0" not in value:
                self._last_id = value
        elif field == "retry":
            with contextlib.suppress(ValueError):
                self._retry = int(value)
        return None


class LineTooLongError(BadResponseError):
    """One line (or one event) of a streamed reply is longer than the limit."""


_BOM = b"\xef\xbb\xbf"


class LineSplitter:
    """Bytes in, complete lines out (without their ``\\n`` or ``\\r\\n``).

    A UTF-8 byte-order mark before the first line is dropped (msgspec would refuse
    that line; the SSE rules drop it too), even when it is split between blocks.
    """

    __slots__ = ("_fresh", "_head", "_limit", "_parts", "_size")

    def __init__(self, max_line: int = 8 * 1024 * 1024) -> None:
        self._limit = max_line
        self._parts: list[bytes] = []
        self._size = 0
        self._fresh = True  # nothing seen yet: a byte-order mark may come
        self._head = b""

    def _start(self, block: bytes) -> bytes:
        """The body's first bytes without a byte-order mark (held back while unsure)."""
        head = self._head + block
        if len(head) < len(_BOM) and _BOM.startswith(head):
            self._head = head
            return b""
        self._fresh = False
        self._head = b""
        return head.removeprefix(_BOM)

    def feed(self, block: bytes) -> list[bytes]:
        """The lines that ``block`` completes, in order."""
        if self._fresh:
            block = self._start(block)
        # One split in C: a block of many lines (or of nothing but newlines, as a
        # compression bomb sends) costs no Python step per line unless one has a CR.
        lines = block.split(b"\n")
        rest = lines.pop()
        limit = self._limit
        if lines:
            parts = self._parts
            first = None
            if parts:  # the first line began in earlier blocks
                parts.append(lines[0])
                first = b"".join(parts)
                parts.clear()
                self._size = 0
                if len(first) > limit:
                    raise self._too_long()
                lines[0] = b""
            if len(block) > limit and max(map(len, lines)) > limit:
                raise self._too_long()
            if b"\r" in block:
                lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
            if first is not None:
                lines[0] = first[:-1] if first.endswith(b"\r") else first
        if rest:
            self._size += len(rest)
            if self._size > limit:
                raise self._too_long()
            self._parts.append(rest)
        return lines

    def end(self) -> bytes | None:
        """The last line when the reply ended without a newline, else ``None``."""
        if self._head:  # the start of a byte-order mark, and nothing more: a line
            self._parts.append(self._head)
            self._head = b""
        if not self._parts:
            return None
        line = b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        return line[:-1] if line.endswith(b"\r") else line

    def _too_long(self) -> LineTooLongError:
        self._parts.clear()
        self._size = 0
        return LineTooLongError(
            f"The server sent a line longer than {self._limit} bytes; refusing it. If the "
            "replies really are that large, raise the line limit (Limits.max_line)."
        )


class EventSplitter:
    """Bytes in, Server-Sent Events out.

    Lines end with CRLF, LF or CR alone (a CR at the end of one block followed by an
    LF at the start of the next is one line end, not two). A UTF-8 byte-order mark
    at the start of the stream is dropped, as the SSE specification says.
    """

    __slots__ = ("_after_cr", "_decoder", "_event_size", "_limit", "_lines")

    def __init__(self, max_event: int = 8 * 1024 * 1024) -> None:
        self._limit = max_event
        self._lines = LineSplitter(max_event)
        self._decoder = _SSEDecoder()
        self._after_cr = False
        self._event_size = 0

    def feed(self, block: bytes) -> list[ServerSentEvent]:
        """The events that ``block`` completes, in order."""
        if b"\r" in block or self._after_cr:
            if self._after_cr and block.startswith(b"\n"):
                block = block[1:]
            self._after_cr = block.endswith(b"\r")
            block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return self._decode(self._lines.feed(block))

    def end(self) -> list[ServerSentEvent]:
        """At the end of the reply: an event not closed by an empty line is dropped, as
        the WHATWG rules (and httpx-sse) say; the list is always empty."""
        last = self._lines.end()
        return self._decode([last]) if last is not None else []

    def _decode(self, lines: list[bytes]) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        decode = self._decoder.decode
        for line in lines:
            if line:
                self._event_size += len(line)
                if self._event_size > self._limit:
                    self._event_size = 0
                    raise LineTooLongError(
                        f"The server sent an event longer than {self._limit} bytes; refusing "
                        "it. If events really are that large, raise Limits.max_line."
                    )
            else:
                self._event_size = 0
            event = decode(line.decode("utf-8", "replace"))
            if event is not None:
                events.append(event)
        return events
