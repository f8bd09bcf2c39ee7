"""Separate ``<think>...</think>`` blocks from a model's text, across chunk boundaries.

Models that predate a server's separate thinking channel write their reasoning inline,
and they open the block at the start of a line (usually of the reply). Only such an
opening tag counts, so a tag quoted inside an answer or an argument stays text. A
block that never closes is thinking to the end. A closing tag with no opening one (a
template that opened the block for the model) turns everything before it into
thinking, provided no marker came first: only the parsers know the markers, so this
filter hands such a tag on as an ``orphan`` piece and they decide.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["CLOSE_TAG", "OPEN_TAG", "Piece", "ThinkFilter", "think_pieces"]

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"

PieceKind = Literal["content", "thinking", "orphan"]
Piece = tuple[PieceKind, str]


class ThinkFilter:
    """Feed text in any chunks; get content, thinking and orphan-tag pieces in order.

    A possible partial tag at the end of a chunk is held back until the next chunk
    (or ``finish``) says what it is, so the split never depends on the chunking.
    """

    __slots__ = ("_blank", "_held", "inside")

    def __init__(self) -> None:
        self.inside = False
        self._held = ""
        self._blank = True  # the current content line holds only spaces so far

    def passes(self, chunk: str) -> bool:
        """Take ``chunk`` as plain content when it cannot touch a tag (the fast path).

        False means nothing was taken: call ``feed``.
        """
        if self._held or self.inside or "<" in chunk:
            return False
        if "\n" in chunk:
            self._blank = not chunk[chunk.rfind("\n") + 1 :].strip(" \t")
        elif self._blank:
            self._blank = not chunk.strip(" \t")
        return True

    def feed(self, chunk: str) -> list[Piece]:
        """The pieces that ``chunk`` completes."""
        text = self._held + chunk
        self._held = ""
        pieces: list[Piece] = []
        position = 0
        # The next tags, found once and reused until passed (-1: none in the rest).
        opening = closing = -2
        while position < len(text):
            if self.inside:
                end = text.find(CLOSE_TAG, position)
                if end < 0:
                    keep = _partial_tag(text, position, (CLOSE_TAG,))
                    _add(pieces, "thinking", text[position : len(text) - keep])
                    self._held = text[len(text) - keep :]
                    break
                _add(pieces, "thinking", text[position:end])
                self.inside = False
                position = end + len(CLOSE_TAG)
                continue
            if -1 != opening < position:
                opening = self._opening(text, position)
            if -1 != closing < position:
                closing = text.find(CLOSE_TAG, position)
            if opening < 0 and closing < 0:
                keep = _partial_tag(text, position, (OPEN_TAG, CLOSE_TAG))
                self._content(pieces, text[position : len(text) - keep])
                self._held = text[len(text) - keep :]
                break
            if closing < 0 or (0 <= opening < closing):
                self._content(pieces, text[position:opening])
                self.inside = True
                position = opening + len(OPEN_TAG)
            else:
                self._content(pieces, text[position:closing])
                pieces.append(("orphan", CLOSE_TAG))
                self._blank = False
                position = closing + len(CLOSE_TAG)
        return pieces

    def finish(self) -> list[Piece]:
        """Whatever was held back, now that no more text will come."""
        held, self._held = self._held, ""
        if not held:
            return []
        return [("thinking" if self.inside else "content", held)]

    def _opening(self, text: str, start: int) -> int:
        """The next opening tag at the start of a line (after spaces), or -1."""
        search = start
        while True:
            found = text.find(OPEN_TAG, search)
            if found < 0:
                return -1
            before = found
            while before > start and text[before - 1] in " \t":
                before -= 1
            if (before > start and text[before - 1] == "\n") or (before == start and self._blank):
                return found
            search = found + 1

    def _content(self, pieces: list[Piece], text: str) -> None:
        if text:
            self._track(text)
            pieces.append(("content", text))

    def _track(self, text: str) -> None:
        if "\n" in text:
            self._blank = not text[text.rfind("\n") + 1 :].strip(" \t")
        elif self._blank:
            self._blank = not text.strip(" \t")


def _add(pieces: list[Piece], kind: PieceKind, text: str) -> None:
    if text:
        pieces.append((kind, text))


def _partial_tag(text: str, start: int, tags: tuple[str, ...]) -> int:
    """How many characters at the end of ``text[start:]`` could begin one of ``tags``."""
    last = text.rfind("<", max(start, len(text) - 8))
    if last < 0:
        return 0
    tail = text[last:]
    return len(tail) if any(tag.startswith(tail) for tag in tags) else 0


def think_pieces(text: str) -> list[Piece]:
    """Batch form: every piece of a whole text."""
    think = ThinkFilter()
    return [*think.feed(text), *think.finish()]
