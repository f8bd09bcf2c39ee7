"""The streaming side of the parser: what to show while a reply streams, and when to stop.

The scanner reads the model's text chunk by chunk, a line at a time. A line that could
still become a marker (``Final An``) is held back until it is decided, so no partial
marker ever reaches the user. Thoughts stream as thinking and the final answer as text,
both without their leading and trailing whitespace (held back until more text shows
it was not trailing). Text before any marker is held until the stream ends: then the
batch parser says what it is (an implicit final answer, or a call written as JSON, or
markers written mid-line), so the scanner never shows text the parser does not return.

It sets ``stop`` as soon as the rest of the reply cannot matter: an invented
``Observation:``, the end of a final answer (an Action or a new Thought after it), the
closing brace of an action's input, or a marker that ends an action. What the reply
means is the batch parser's to say (``_parser``); the scanner's rules are the same,
applied as the text arrives, so what it shows is what the batch parser returns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from ollm.types import ToolSchema
from ollm_react._arguments import Balance, call_opening
from ollm_react._markers import (
    MARKER_LINE,
    could_be_fence,
    could_become_marker,
    is_bare_fence,
    is_fence_line,
    marker_kind,
    strips_after_colon,
)
from ollm_react._parser import ParsedAnswer, parse_reply
from ollm_react._placeholder import could_become_placeholder, is_placeholder
from ollm_react._think import ThinkFilter

__all__ = ["Output", "StreamScanner"]

Output = tuple[Literal["text", "thinking"], str]

_PREAMBLE, _THOUGHT, _ANSWER, _ACTION, _AFTER_ACTION, _INPUT = range(6)
_SKIP_EMPHASIS, _SKIP_SPACE, _SHOWING = range(3)


class StreamScanner:
    """Feed a reply's text as it streams; get what to show, and ``stop`` when done.

    ``tools`` are the tools the reply may call: a reply with no marker is read by the
    batch parser with them when it ends (a JSON object naming one is a call, not an
    answer to show).
    """

    __slots__ = (
        "_action_tail",
        "_answer_fences",
        "_balance",
        "_decided",
        "_fence",
        "_fences",
        "_held",
        "_kind",
        "_lead",
        "_line",
        "_out",
        "_outer_fence",
        "_pending",
        "_preamble",
        "_shown_thought",
        "_think",
        "_tools",
        "mode",
        "saw_marker",
        "stop",
    )

    def __init__(self, tools: Sequence[ToolSchema] = ()) -> None:
        self._tools = tuple(tools)
        self._think = ThinkFilter()
        self.mode = _PREAMBLE
        self.stop: str | None = None
        self.saw_marker = False
        self._line = ""
        self._decided = False
        self._preamble: list[str] = []
        self._out: list[Output] = []
        self._kind: Literal["text", "thinking"] = "thinking"
        self._lead = _SHOWING
        self._held: list[str] = []  # trailing space (and a stray fence) not shown yet
        self._shown_thought = False
        self._action_tail = ""
        self._balance: Balance | None = None
        # Code fences: the current line while it may be one, those before the answer,
        # and the answer's own (to drop the stray closing fence of a fenced reply).
        self._fence: str | None = ""
        self._fences = 0
        self._answer_fences = 0
        self._outer_fence = False
        # The start of a final answer while it may still be a placeholder (never shown
        # if it is one: the batch parser then asks for the real answer).
        self._pending: str | None = None

    @property
    def answering(self) -> bool:
        """Whether the reply reached a line-start Final Answer (its text streamed as text)."""
        return self.mode == _ANSWER

    @property
    def in_action(self) -> bool:
        """Whether the reply got as far as an Action (the batch parser decides if it is valid)."""
        return self.mode in (_ACTION, _AFTER_ACTION, _INPUT)

    def feed(self, text: str) -> list[Output]:
        """Take one chunk; return what can be shown now."""
        out: list[Output] = []
        self._out = out
        if self.stop is not None:
            return out
        if self._think.passes(text):
            if self._decided and self._fence is None and "\n" not in text:
                # The common case, kept short: more of a line known to be content.
                mode = self.mode
                if (
                    mode in (_ANSWER, _THOUGHT)
                    and self._lead == _SHOWING
                    and not self._held
                    and self._pending is None
                    and not text[-1:].isspace()
                ):
                    out.append((self._kind, text))
                    if mode == _THOUGHT:
                        self._shown_thought = True
                else:
                    self._deliver(text)
            else:
                self._content(text)
            return out
        for kind, piece in self._think.feed(text):
            self._piece(kind, piece)
            if self._stopped():
                break
        return out

    def end(self) -> list[Output]:
        """The stream ended (or was stopped): return what is left to show."""
        out: list[Output] = []
        self._out = out
        if self.stop is None:
            for kind, piece in self._think.finish():
                self._piece(kind, piece)
            if self.stop is None and not self._decided and self._line:
                line, self._line = self._line, ""
                if not self._stray_fence(line):
                    self._deliver(line)
        if self._pending is not None:
            pending, self._pending = self._pending, None
            if pending and not is_placeholder(pending):
                self._out_add("text", pending)
        if self.mode == _PREAMBLE:
            text = "".join(self._preamble)
            self._preamble = []
            if text.strip():
                # No marker at a line start: the parser's looser readings decide.
                parsed = parse_reply(text, self._tools)
                if isinstance(parsed, ParsedAnswer):
                    out.append(("text", parsed.answer))
        return out

    def _stopped(self) -> bool:
        # A call, so that type checkers see that the helpers above may have set it.
        return self.stop is not None

    # -- pieces and lines --------------------------------------------------------------

    def _piece(self, kind: str, piece: str) -> None:
        if kind == "content":
            self._content(piece)
        elif kind == "thinking":
            self._out_add("thinking", piece)
            if piece.strip():
                # The next Thought starts on a line of its own ("plan" then "x", not "planx").
                self._shown_thought = True
        elif self.saw_marker:
            self._content(piece)
        else:
            # A closing tag with no opening one: everything so far was thinking.
            before = "".join(self._preamble) + self._line
            self._preamble = []
            self._line = ""
            self._decided = False
            self._fence = ""
            self._fences = 0
            self._reasoning(before)

    def _content(self, text: str) -> None:
        start = 0
        while self.stop is None:
            newline = text.find("\n", start)
            if newline < 0:
                if start < len(text):
                    self._part(text[start:])
                return
            if newline > start:
                self._part(text[start:newline])
                if self._stopped():
                    return
            self._end_line()
            start = newline + 1

    def _part(self, text: str) -> None:
        """Some text of the current line (no newline in it)."""
        fence = self._fence
        if fence is not None:
            fence += text
            self._fence = fence if could_be_fence(fence) else None
        if self._decided:
            self._deliver(text)
            return
        line = self._line + text
        match = MARKER_LINE.match(line)
        if match is not None:
            self._decided = True
            self._line = ""
            self._marker(match, line)
        elif could_become_marker(line):
            self._line = line
        else:
            self._decided = True
            self._line = ""
            self._deliver(line)

    def _end_line(self) -> None:
        line = "" if self._decided else self._line
        self._line = ""
        self._decided = False
        if self._stray_fence(line):
            # Held like trailing space: shown only if more of the answer follows.
            self._lead = _SHOWING
            self._held.append(line)
            line = ""
        self._fence = ""
        if line:
            self._deliver(line)
        if self.stop is None:
            self._deliver("\n")

    def _stray_fence(self, undecided: str) -> bool:
        """Count the line if it is a fence; true if it may close a fenced reply.

        Only an undecided line (a bare fence is one until its end) can be held back:
        any other was shown as it came.
        """
        if self._fence is None or not is_fence_line(self._fence):
            return False
        if self.mode == _ANSWER:
            self._answer_fences += 1
            odd = self._answer_fences % 2 == 1
            return self._outer_fence and odd and is_bare_fence(undecided)
        if self.mode in (_PREAMBLE, _THOUGHT):
            self._fences += 1
        return False

    # -- markers -----------------------------------------------------------------------

    def _marker(self, match: re.Match[str], line: str) -> None:
        kind = marker_kind(match)
        mode = self.mode
        if kind == "answer" and mode == _ANSWER:
            # A second "Final Answer:" inside the answer is part of its text.
            self._deliver(line)
            return
        self.saw_marker = True
        if kind == "observation":
            self.stop = "observation"
            return
        if mode == _PREAMBLE:
            self._start_thinking()
            mode = self.mode
        if mode == _THOUGHT:
            if kind == "thought":
                self._enter(_THOUGHT, match)
            elif kind == "answer":
                self._enter(_ANSWER, match)
            elif kind == "action":
                self._enter(_ACTION, match)
            else:
                # An Action Input after a thought: its Action may be in the middle of the
                # thought's line ("Thought: x Action: search"). Read the input to its end;
                # the batch parser says which it was.
                self._enter(_INPUT, match)
        elif mode == _ANSWER:
            self.stop = "answer ended"
        elif mode in (_ACTION, _AFTER_ACTION):
            if self._balance is not None:
                self.stop = "action ended"
            elif kind == "input":
                self._enter(_INPUT, match)
            elif kind == "thought":
                self.mode = _AFTER_ACTION
            else:
                self.stop = "action ended"
        else:
            self.stop = "input ended"
        if self.stop is None:
            self._deliver(line[match.end() :])

    def _start_thinking(self) -> None:
        """The first marker: text before it was reasoning, not an answer."""
        before = "".join(self._preamble)
        self._preamble = []
        self.mode = _THOUGHT
        self._reasoning(before)

    def _reasoning(self, text: str) -> None:
        """Show text before the first marker (or an orphan ``</think>``) as thinking.

        Without its code-fence lines, and on a line of its own after thinking already
        shown ("deep" then "plan", not "deepplan").
        """
        lines = text.split("\n")
        text = "\n".join(line for line in lines if not is_fence_line(line)).strip()
        if text:
            self._out_add("thinking", "\n" + text if self._shown_thought else text)
            self._shown_thought = True

    def _enter(self, mode: int, match: re.Match[str]) -> None:
        self.mode = mode
        self._lead = _SKIP_EMPHASIS if strips_after_colon(match) else _SKIP_SPACE
        self._held = ["\n"] if mode == _THOUGHT and self._shown_thought else []
        if mode == _THOUGHT:
            self._kind = "thinking"
        elif mode == _ANSWER:
            self._kind = "text"
            self._outer_fence = self._fences % 2 == 1
            self._answer_fences = 0
            self._pending = ""
        elif mode == _ACTION:
            self._action_tail = ""
            self._balance = None
        elif mode == _INPUT:
            self._balance = Balance("{")

    # -- content -----------------------------------------------------------------------

    def _deliver(self, text: str) -> None:
        mode = self.mode
        if mode in (_ANSWER, _THOUGHT):
            self._emit(text)
        elif mode == _PREAMBLE:
            self._preamble.append(text)
        elif mode == _ACTION:
            balance = self._balance
            if balance is None:
                # Search the new text, and the character before it (for "name(").
                probe = self._action_tail + text
                self._action_tail = probe[-1:]
                opening = call_opening(probe)
                if opening < 0:
                    return
                balance = self._balance = Balance("({")
                text = probe[opening:]
            if balance.feed(text) >= 0:
                self.stop = "call closed"
        elif mode == _INPUT:
            assert self._balance is not None
            if self._balance.feed(text) >= 0:
                self.stop = "call closed"

    def _emit(self, text: str) -> None:
        """Show ``text`` without the marker's leading emphasis and space, or trailing space."""
        if self._lead != _SHOWING:
            index = 0
            if self._lead == _SKIP_EMPHASIS:
                while index < len(text) and text[index] in "*_`":
                    index += 1
                if index < len(text):
                    self._lead = _SKIP_SPACE
            if self._lead == _SKIP_SPACE:
                while index < len(text) and text[index].isspace():
                    index += 1
                if index < len(text):
                    self._lead = _SHOWING
            text = text[index:]
            if not text:
                return
        shown = text.rstrip()
        if not shown:
            self._held.append(text)
            return
        trailing = text[len(shown) :] if len(shown) < len(text) else ""
        held = self._held
        if held:
            held.append(shown)
            shown = "".join(held)
        self._held = [trailing] if trailing else []
        self._out_add(self._kind, shown)
        if self._kind == "thinking":
            self._shown_thought = True

    def _out_add(self, kind: Literal["text", "thinking"], text: str) -> None:
        if kind == "text" and self._pending is not None:
            self._pending += text
            if could_become_placeholder(self._pending):
                return
            text, self._pending = self._pending, None
        out = self._out
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))
