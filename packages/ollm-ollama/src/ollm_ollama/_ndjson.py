"""Splitting an NDJSON byte stream into lines, as fast as Python allows.

Reads arrive in pieces that need not end at a line break: the remainder is kept for the
next read, and the last line may have no ``\\n`` at all (Ollama answers some streaming
requests with one plain JSON object). Empty lines are skipped.
"""

from __future__ import annotations

from ollm.errors import BadResponseError

__all__ = ["MAX_LINE_BYTES", "LineSplitter", "excerpt"]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A line longer than this is not Ollama talking (the stream is refused)."""


class LineSplitter:
    """Feed it reads; it returns the complete lines they finish."""

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, data: bytes) -> list[bytes]:
        """The complete lines of ``data`` (with what earlier reads left over), in order.

        Lines may be empty or whitespace; callers skip those.
        """
        if self._rest:
            data = self._rest + data
        lines = data.split(b"\n")
        rest = lines.pop()
        if len(rest) > MAX_LINE_BYTES:
            self._rest = b""
            raise BadResponseError(
                f"The server sent more than {MAX_LINE_BYTES} bytes without a line break, "
                f"which is not Ollama's stream format: {excerpt(rest)}"
            )
        self._rest = rest
        return lines

    def tail(self) -> bytes:
        """What is left at the end of the stream: a last line without ``\\n``, or ``b""``."""
        rest, self._rest = self._rest, b""
        return rest


def excerpt(data: bytes, limit: int = 200) -> str:
    """Up to ``limit`` characters of ``data`` for an error message, quoted."""
    text = data[: limit * 4].decode("utf-8", "replace")
    if len(text) > limit:
        return repr(text[:limit]) + "..."
    return repr(text)
