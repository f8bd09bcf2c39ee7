"""``PartialJSON``: a JSON value read while it streams, one piece at a time.

The reading is incremental and runs at the speed of C for nearly every byte: the
complete elements of the open container are decoded by msgspec in one call, their end
found by trying the last few commas that may end one (``_bulk``), or else by regular
expressions (with possessive quantifiers, so they never backtrack) that take them all,
nested values included up to a few levels; Python steps in only at the edges of a piece
(a container that opens, an element cut in two). Each byte is read a bounded
number of times, so a reply of n characters costs O(n), never a re-parse of the text so
far per piece. Pieces are read in batches (each 1/16 of the pieces that have arrived,
so a long reply in tiny pieces costs no more than one in large pieces): between two
batches a piece costs the caller a list append and a ``len`` (the runtime appends to
``pieces`` and calls ``read`` when they number ``due``), and the
partial values shown number O(log n): a consumer that copies or encodes each one
(``ollm chat --json``) spends O(n) in all, not O(n^2).

The value is built in place: a container is added to its parent when it opens, the
elements when they complete, and the string being written shows what has arrived of it
(republished while short, then each time it has doubled, so a long string costs O(n)
too). Text before the first ``{`` or ``[`` (prose, a code fence) is skipped, and what
follows the value is ignored; anything else that is not JSON stops the reading (the
reply is judged whole at its end anyway), and so does a value that nests more than
``MAX_JSON_DEPTH`` levels, as tool-call arguments may not: a model's output never makes
the value (nor the events that show it) too deep to walk or to encode.

Internal: not part of ollm's public API; its layout may change in any release.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ollm.types.depth import MAX_JSON_DEPTH
from ollm.types.events import PartialOutputEvent

__all__ = ["NEVER", "PartialJSON"]

_WS = r"[ \t\r\n]*+"
# Written as "normal* (special normal*)*", which the engine runs without trying an
# alternative per character.
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_SCALAR = r'[^"\[\]{},:\s]++'
_PLAIN = r'[^"\[\]{}]*+'


def _content(depth: int) -> str:
    """A container's content, complete, nested up to ``depth`` more levels."""
    special = _STRING
    if depth > 0:
        inner = _content(depth - 1)
        special = rf"(?:{_STRING}|\[{inner}\]|\{{{inner}\}})"
    return f"{_PLAIN}(?:{special}{_PLAIN})*+"


_VALUE = rf"(?:{_STRING}|{_SCALAR}|\[{_content(3)}\]|\{{{_content(3)}\}})"
_MEMBER = rf"{_WS}{_STRING}{_WS}:{_WS}{_VALUE}{_WS}"
_ITEM = rf"{_WS}{_VALUE}{_WS}"
# Complete elements, each followed by its comma; then the last one and the close.
_RUN = {True: re.compile(rf"(?:{_MEMBER},)*+"), False: re.compile(rf"(?:{_ITEM},)*+")}
_LAST = {True: re.compile(rf"{_MEMBER}\}}"), False: re.compile(rf"{_ITEM}\]")}
_CLOSE = re.compile(rf"{_WS}([\]}}])")
_AFTER = re.compile(rf"{_WS}(?:(,)|([\]}}]))")
_KEY = re.compile(rf"{_WS}({_STRING}){_WS}:")
_OPEN = re.compile(rf"{_WS}([\[{{\"])")
_SPACE = re.compile(_WS)
_STRING_BODY = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
# A string shorter than this is republished with every piece; a longer one when it has
# doubled since it was last shown.
_SHOW_ALWAYS = 4096
# The most text an element cut in two may hold back (a key, a number): past it, the
# reply is not the JSON this reader follows.
_MAX_HELD = 65536
# Text this long, or longer, is first tried in one msgspec call (``_bulk``), with at most
# this many guesses of where its complete elements end.
_BULK_LEAST = 256
_BULK_TRIES = 3
# msgspec's words for a value followed by more text: tried as elements, the text holds
# the container's end (the last few elements of an object cut in two, then its parent's).
_CLOSED_EARLIER = "JSON is malformed: trailing characters"

_START, _AFTER_ELEMENT = 0, 1
NEVER = 1 << 62  # ``due`` once the value is complete, or reading has stopped


class PartialJSON:
    """Feed the pieces of a JSON text; ``value`` is the object or array read so far."""

    __slots__ = (
        "_held",
        "_raw",
        "_raw_length",
        "_read",
        "_shown",
        "_slot",
        "_stack",
        "_string",
        "done",
        "due",
        "pieces",
        "stopped",
        "value",
    )

    def __init__(self) -> None:
        self.value: dict[str, Any] | list[Any] | None = None
        self.done = False  # the value is complete
        self.stopped = False  # something that is not JSON came: reading stopped
        # Each open container: [container, is_dict, state].
        self._stack: list[list[Any]] = []
        self._held = ""  # the start of an element cut by a piece's end
        # The pieces not read yet (the caller appends to the list), read as a batch
        # once they number ``due``: 1/16 of the pieces read so far.
        self.pieces: list[str] = []
        self.due = 1
        self._read = 0
        self._string = False  # inside a string value
        self._raw: list[str] = []  # its text so far, escapes as written
        self._raw_length = 0
        self._shown = 0  # how much of it the value shows
        self._slot: tuple[Any, Any] | None = None  # where the string's value goes

    def feed(self, piece: str) -> bool:
        """Add ``piece`` to ``pieces``, and ``read`` them when due; whether the value
        changed."""
        pieces = self.pieces
        pieces.append(piece)
        if len(pieces) < self.due:
            return False
        return self.read()

    def event(self) -> PartialOutputEvent:
        """The value read so far, as the event that shows it (after a ``read`` that
        changed it)."""
        assert self.value is not None
        return PartialOutputEvent(self.value)

    def read(self) -> bool:
        """Read ``pieces`` (a batch: call it once they number ``due``, and at the
        stream's end); whether the value changed."""
        pieces = self.pieces
        if not pieces or self._ended():
            pieces.clear()
            return False
        text = pieces[0] if len(pieces) == 1 else "".join(pieces)
        self._read += len(pieces)
        pieces.clear()
        self.due = self._read >> 4 or 1
        changed = self._take(self._held + text if self._held else text)
        if self._ended():
            self.due = NEVER
        return changed

    def _ended(self) -> bool:
        """Whether the value is complete, or reading stopped."""
        return self.done or self.stopped

    flush = read

    def _take(self, text: str) -> bool:
        self._held = ""
        end = len(text)
        changed = False
        stack = self._stack
        position = 0
        if self.value is None:
            starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
            if not starts:
                return False
            position = min(starts) + 1
            self.value = {} if text[position - 1] == "{" else []
            stack.append([self.value, text[position - 1] == "{", _START])
            changed = True
        while position < end:
            if self._string:
                body = _STRING_BODY.match(text, position)
                assert body is not None
                stop = body.end()
                if stop > position:
                    self._raw.append(text[position:stop])
                    self._raw_length += stop - position
                if stop < end and text[stop] == '"':
                    self._string = False
                    position = stop + 1
                    if not self._close_string():
                        return changed
                    changed = True
                    continue
                self._held = text[stop:]  # a backslash whose escape comes next
                return self._show_string() or changed
            frame = stack[-1]
            container, is_dict = frame[0], frame[1]
            if frame[2] == _AFTER_ELEMENT:
                after = _AFTER.match(text, position)
                if after is None:
                    return self._hold(text, position, changed)
                position = after.end()
                if after.group(1):
                    frame[2] = _START
                    continue
                if not self._close(after.group(2)):
                    return changed
                if self.done:
                    return changed
                continue
            # Every complete element at once (msgspec finds where they end, or the
            # expression does), then the last one with the close.
            bulk = _bulk(text, position, end, container, is_dict)
            if bulk > position:
                position = bulk
                changed = True
            run = _RUN[is_dict].match(text, position)
            assert run is not None
            stop = run.end()
            last = _LAST[is_dict].match(text, stop)
            if last is not None:
                if not self._commit(container, is_dict, text[position : last.end() - 1]):
                    return changed
                stack.pop()
                position = last.end()
                changed = True
                if not stack:
                    self.done = True
                    return changed
                continue
            if stop > position:
                if not self._commit(container, is_dict, text[position : stop - 1]):
                    return changed
                changed = True
                position = stop
            close = _CLOSE.match(text, position)
            if close is not None:
                position = close.end()
                if not self._close(close.group(1)):
                    return changed
                changed = True
                if self.done:
                    return changed
                continue
            # An element cut by the piece's end, or nested deeper than the expressions.
            start = position
            key: str | None = None
            if is_dict:
                found = _KEY.match(text, position)
                if found is None:
                    return self._hold(text, start, changed)
                key = msgspec.json.decode(found.group(1), type=str)
                position = found.end()
            opened = _OPEN.match(text, position)
            if opened is None:
                return self._hold(text, start, changed)
            mark = opened.group(1)
            position = opened.end()
            frame[2] = _AFTER_ELEMENT
            if mark == '"':
                self._string = True
                self._raw = []
                self._raw_length = self._shown = 0
                if is_dict:
                    self._slot = (container, key)
                else:
                    self._slot = (container, len(container))
                    container.append("")
                continue
            if len(stack) >= MAX_JSON_DEPTH:
                self.stopped = True  # the final reply is judged (and refused) whole
                return changed
            child: dict[str, Any] | list[Any] = {} if mark == "{" else []
            if is_dict:
                container[key] = child
            else:
                container.append(child)
            stack.append([child, mark == "{", _START])
            changed = True
        return changed

    def _hold(self, text: str, start: int, changed: bool) -> bool:
        """Keep ``text[start:]`` (an element cut in two) for the next piece."""
        held = text[start:]
        if len(held) > _MAX_HELD:
            self.stopped = True
        elif _SPACE.fullmatch(held) is None:
            self._held = held
        return changed

    def _commit(self, container: Any, is_dict: bool, elements: str) -> bool:
        """Add the complete ``elements`` (their JSON text, commas between) to
        ``container``; ``False`` (and stopped) when they are not JSON."""
        try:
            if is_dict:
                container.update(msgspec.json.decode(f"{{{elements}}}"))
            else:
                container.extend(msgspec.json.decode(f"[{elements}]"))
        except (msgspec.DecodeError, TypeError, RecursionError):
            self.stopped = True
            return False
        return True

    def _close(self, mark: str) -> bool:
        """The open container ends with ``mark``; ``False`` (and stopped) if it is the
        wrong one."""
        stack = self._stack
        if stack[-1][1] != (mark == "}"):
            self.stopped = True
            return False
        stack.pop()
        if not stack:
            self.done = True
        return True

    def _close_string(self) -> bool:
        text = _decoded(self._raw)
        if text is None or self._slot is None:
            self.stopped = True
            return False
        container, where = self._slot
        container[where] = text
        return True

    def _show_string(self) -> bool:
        """Show the string so far, while it is short or once it has doubled."""
        length = self._raw_length
        if length == self._shown or self._slot is None:
            return False
        if length > _SHOW_ALWAYS and length < 2 * self._shown:
            return False
        text = _decoded(self._raw, partial=True)
        if text is None:
            return False
        self._shown = length
        container, where = self._slot
        container[where] = text
        return True


def _bulk(text: str, start: int, end: int, container: Any, is_dict: bool) -> int:
    """Add the complete elements of ``text[start:end]`` to ``container`` in one msgspec
    call, when they are many; where they end (after their last comma), or ``start``.

    The last comma between two elements is found by trying the last few commas followed
    by what starts an element here (``"`` for a key, else the first element's first
    character): the text up to a comma inside a string or a nested value is not JSON
    (a string or a bracket is left open), so the first that decodes is the one. Nothing
    is done when none of them decodes: the expressions read the text instead.
    """
    if end - start < _BULK_LEAST:
        return start
    first = _SPACE.match(text, start)
    assert first is not None
    if first.end() >= end:
        return start
    opener = '"' if is_dict else text[first.end()]
    cut = end
    for _ in range(_BULK_TRIES):
        cut = text.rfind(",", start, cut)
        while cut > start:
            after = _SPACE.match(text, cut + 1)
            assert after is not None
            if after.end() < end and text[after.end()] == opener:
                break
            cut = text.rfind(",", start, cut)
        if cut <= start:
            return start
        elements = text[start:cut]
        try:
            if is_dict:
                found = msgspec.json.decode(f"{{{elements}}}")
            else:
                found = msgspec.json.decode(f"[{elements}]")
        except msgspec.DecodeError as exc:
            if str(exc).startswith(_CLOSED_EARLIER):
                return start  # the container ends before this cut, and so before any
            continue
        except RecursionError:
            return start  # nested past msgspec's bound: the stack above refuses it
        if is_dict:
            container.update(found)
        else:
            container.extend(found)
        return cut + 1
    return start


def _decoded(raw: list[str], *, partial: bool = False) -> str | None:
    """The string whose JSON text (without quotes) is ``raw``; ``None`` if invalid. A
    ``partial`` one may end in the middle of an escape: that escape is left out."""
    text = "".join(raw)
    if len(raw) > 1:
        raw[:] = [text]
    if "\\" not in text:
        return text
    try:
        return msgspec.json.decode(f'"{text}"', type=str)
    except msgspec.DecodeError:
        if not partial:
            return None
    cut = text.rfind("\\")
    try:
        return msgspec.json.decode(f'"{text[:cut]}"', type=str)
    except msgspec.DecodeError:
        return None
