"""``PartialJSON``: a JSON value read while it streams, one piece at a time.

Each piece is read once (a regular expression per token, a few per string), so a reply
of n characters in k pieces costs O(n + k), never a re-parse of the whole text per
piece. The value is built in place: containers are added to their parent as they open,
scalars as they complete, and the string being written shows what has arrived of it
(republished while short, then each time it has doubled, so a long string costs O(n)
too). Text before the first ``{`` or ``[`` (prose, a code fence) is skipped, and what
follows the value is ignored; anything else that is not JSON stops the reading (the
reply is judged whole at its end anyway).

Internal: not part of ollm's public API; its layout may change in any release.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

__all__ = ["PartialJSON"]

_TOKEN = re.compile(
    r"[ \t\r\n]*(?:([{}\[\]:,])|(\")|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    r"|(true|false|null))"
)
_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*', re.DOTALL)
_PREFIXES = re.compile(
    r"[ \t\r\n]*(?:-?[0-9.eE+-]*|t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?)"
)
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*")
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}
# A string shorter than this is republished with every piece; a longer one when it has
# doubled since it was last shown.
_SHOW_ALWAYS = 4096

# Frame states: what the container expects next.
_KEY, _COLON, _VALUE, _COMMA = range(4)


class PartialJSON:
    """Feed the pieces of a JSON text; ``value`` is the object or array read so far."""

    __slots__ = (
        "_carry",
        "_key",
        "_raw",
        "_raw_length",
        "_shown",
        "_slot",
        "_stack",
        "_string",
        "done",
        "stopped",
        "value",
    )

    def __init__(self) -> None:
        self.value: dict[str, Any] | list[Any] | None = None
        self.done = False  # the value is complete
        self.stopped = False  # something that is not JSON came: reading stopped
        # Each open container: [container, is_dict, state, key].
        self._stack: list[list[Any]] = []
        self._carry = ""
        self._string = False  # inside a string
        self._key = False  # ... which is a key
        self._raw: list[str] = []  # the string's text so far, escapes as written
        self._raw_length = 0
        self._shown = 0  # how much of it the value shows
        self._slot: tuple[Any, Any] | None = None  # where the string's value goes

    def feed(self, piece: str) -> bool:
        """Read ``piece``; whether the value changed."""
        if self.done or self.stopped:
            return False
        text = self._carry + piece if self._carry else piece
        self._carry = ""
        end = len(text)
        if self.value is None:
            starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
            if not starts:
                return False
            position = min(starts)
        else:
            position = 0
        changed = False
        token = _TOKEN.match
        stack = self._stack
        while position < end:
            if self._string:
                body = _STRING_BODY.match(text, position)
                assert body is not None
                stop = body.end()
                if stop > position:
                    self._raw.append(text[position:stop])
                    self._raw_length += stop - position
                if stop < end and text[stop] == '"':
                    changed = self._close_string() or changed
                    position = stop + 1
                    continue
                self._carry = text[stop:]  # a backslash whose escape is in the next piece
                return self._show_string() or changed
            found = token(text, position)
            if found is None or (
                found.lastindex == 3 and _NUMBER_TAIL.fullmatch(text, found.end()) is not None
            ):
                # A number or word cut by the piece's end (or the start of one) waits
                # for the next piece; anything else is not JSON.
                rest = text[position:]
                prefix = _PREFIXES.fullmatch(rest)
                if prefix is not None:
                    self._carry = rest
                    return changed
                self.stopped = True
                return changed
            position = found.end()
            kind = found.lastindex
            if kind == 1:
                mark = found.group(1)
                if mark in "{[":
                    changed = True
                    child: dict[str, Any] | list[Any] = {} if mark == "{" else []
                    if not stack:
                        self.value = child
                    elif not self._put(child):
                        return changed
                    stack.append([child, mark == "{", _KEY if mark == "{" else _VALUE, None])
                elif mark in "}]":
                    if not stack or stack[-1][1] != (mark == "}"):
                        self.stopped = True
                        return changed
                    stack.pop()
                    if not stack:
                        self.done = True
                        return changed
                elif mark == ":":
                    frame = stack[-1] if stack else None
                    if frame is None or frame[2] != _COLON:
                        self.stopped = True
                        return changed
                    frame[2] = _VALUE
                else:  # ","
                    frame = stack[-1] if stack else None
                    if frame is None or frame[2] != _COMMA:
                        self.stopped = True
                        return changed
                    frame[2] = _KEY if frame[1] else _VALUE
            elif kind == 2:
                frame = stack[-1] if stack else None
                if frame is None or frame[2] not in (_KEY, _VALUE):
                    self.stopped = True
                    return changed
                self._string = True
                self._key = frame[2] == _KEY
                self._raw = []
                self._raw_length = self._shown = 0
                self._slot = None
            else:
                text_value = found.group(kind or 0)
                value = _LITERALS[text_value] if kind == 4 else msgspec.json.decode(text_value)
                if not self._put(value):
                    return changed
                changed = True
        return changed

    def _put(self, value: Any) -> bool:
        """``value`` into the open container; ``False`` (and stopped) if none expects one."""
        frame = self._stack[-1]
        if frame[2] != _VALUE:
            self.stopped = True
            return False
        container = frame[0]
        if frame[1]:
            container[frame[3]] = value
        else:
            container.append(value)
        frame[2] = _COMMA
        return True

    def _close_string(self) -> bool:
        self._string = False
        text = _decoded(self._raw)
        if text is None:
            self.stopped = True
            return False
        frame = self._stack[-1]
        if self._key:
            frame[3] = text
            frame[2] = _COLON
            return False
        if self._slot is not None:
            container, where = self._slot
            container[where] = text
            frame[2] = _COMMA
            return True
        return self._put(text)

    def _show_string(self) -> bool:
        """Show the string so far, while it is short or once it has doubled."""
        length = self._raw_length
        if self._key or length == self._shown:
            return False
        if length > _SHOW_ALWAYS and length < 2 * self._shown:
            return False
        text = _decoded(self._raw, partial=True)
        if text is None:
            return False
        self._shown = length
        frame = self._stack[-1]
        container = frame[0]
        if self._slot is None:
            if frame[1]:
                self._slot = (container, frame[3])
            else:
                self._slot = (container, len(container))
                container.append("")
        slot, where = self._slot
        slot[where] = text
        return True


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
