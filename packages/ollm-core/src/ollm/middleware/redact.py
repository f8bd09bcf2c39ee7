"""``redact``: secrets such as API keys removed from what a chat shows, emits and keeps.

Each pattern is a regular expression; what it matches becomes ``[REDACTED]`` in the text
as it streams (the screen), in every event (``--json``), in the messages the history
keeps (and so in the conversation log), and in the system prompt of each request. The
model's own words pass on as they came.

Streamed text arrives in pieces, so a key may be cut between two events. Each stream (the
reply's text, its thinking, each tool call's argument pieces) is matched as it comes: it
holds back only its last ``hold`` characters, the longest of the patterns' shortest
matches (41 for the built-in ones), where a key may have begun and not yet be
recognisable, whatever the characters around it (no whitespace needed). A key once
recognised is replaced at once, and what continues it in later pieces is dropped. The
held characters go out when the stream ends (at the next event that is not a piece of
text, thinking, a call's arguments or a notice). A partial typed output
(``PartialOutputEvent``) leaves out the same last characters of its string still
streaming.

A pattern must therefore tell a key from its first ``hold`` characters (the built-in ones
do); one whose match can be told only further on (a long run in its middle before the
part that decides) is applied to whole texts but may let the start of a streamed key
through: pass ``hold=`` to widen the window.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any, TypeVar

import msgspec

from ollm.runtime.middleware import redaction
from ollm.types.events import (
    ChatEvent,
    FinishEvent,
    NoticeEvent,
    OutputEvent,
    PartialOutputEvent,
    TextEvent,
    ThinkingEvent,
    ToolCallDeltaEvent,
)
from ollm.types.messages import Message
from ollm.types.middleware import MiddlewareContext
from ollm.types.request import ProviderRequest

__all__ = ["DEFAULT_PATTERNS", "REPLACEMENT", "Redact", "redaction"]

DEFAULT_PATTERNS: tuple[str, ...] = (
    r"sk-[A-Za-z0-9_-]{16,}",  # OpenAI and Anthropic keys (sk-..., sk-proj-..., sk-ant-...)
    r"AIza[0-9A-Za-z_-]{35}",  # Google API keys
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{30,}",  # GitHub fine-grained tokens
    r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab tokens
    r"xox[abprs]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key ids
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face tokens
    # JSON Web Tokens (header.payload.signature, each part base64url): recognised from a
    # header of 20 characters, or a short header and 10 of the payload, so that a long
    # token is known as it streams, not only once its signature has come.
    r"eyJ[A-Za-z0-9_-]{17,}(?:\.[A-Za-z0-9_-]*){0,2}"
    r"|eyJ[A-Za-z0-9_-]{10,16}\.[A-Za-z0-9_-]{10,}(?:\.[A-Za-z0-9_-]*)?",
)
"""The secrets ``Redact()`` removes unless given other patterns."""

REPLACEMENT = "[REDACTED]"

# Held back when a pattern's shortest match cannot be worked out (the stdlib's parser
# moved): generous, since less could let a key through.
_UNKNOWN_HOLD = 512
# A key being dropped as it continues is matched again with each piece; past this length
# only its first and last halves are, so that a piece costs its own length and not the
# whole key's (a pattern's repeated part matches the same either way).
_RUN_CONTEXT = 1024

T = TypeVar("T")


class Redact:
    """A middleware that replaces what ``patterns`` match with ``replacement``.

    ``patterns`` are regular expressions (``DEFAULT_PATTERNS`` unless given; pass
    ``[*DEFAULT_PATTERNS, r"my-secret-\\w+"]`` to add yours). ``hold`` is how many
    characters a stream holds back at most (by default the longest of the patterns'
    shortest matches).
    """

    name = "redact"

    def __init__(
        self,
        patterns: Iterable[str] | None = None,
        *,
        replacement: str = REPLACEMENT,
        hold: int | None = None,
    ) -> None:
        chosen = tuple(DEFAULT_PATTERNS if patterns is None else patterns)
        if not chosen:
            raise ValueError("Redact needs at least one pattern")
        self.pattern = re.compile("|".join(f"(?:{p})" for p in chosen))
        # Each pattern tried at every position: ``(?=(...))`` matches nothing, so the
        # search goes on from the next character, not from the match's end.
        self._anywhere = tuple(re.compile(f"(?=({p}))") for p in chosen)
        self.replacement = replacement
        if hold is None:
            hold = max(_shortest(p) for p in chosen)
        elif not isinstance(hold, int) or hold < 1:
            raise ValueError(f"hold must be a number of characters of at least 1, not {hold!r}")
        self.hold = max(1, hold)
        self._state = f"redact-{id(self)}"

    def text(self, text: str) -> str:
        """``text`` with every match replaced (where matches overlap, their union)."""
        out: list[str] = []
        shown = 0
        for start, end in self._spans(text):
            out += (text[shown:start], self.replacement)
            shown = end
        if not out:
            return text
        out.append(text[shown:])
        return "".join(out)

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """Where ``text`` holds a match of any pattern starting anywhere, overlapping
        matches joined: a match that swallows the start of another (``xoxb-ab`` written
        before a key) cannot leave the other's rest in the clear."""
        if self.pattern.search(text) is None:  # the common case, in one pass
            return []
        found: list[tuple[int, int]] = []
        for anywhere in self._anywhere:
            for match in anywhere.finditer(text):
                length = len(match.group(1))
                if length:
                    found.append((match.start(), match.start() + length))
        if len(found) < 2:
            return found
        found.sort()
        spans = [found[0]]
        for start, end in found[1:]:
            last_start, last_end = spans[-1]
            if start < last_end:
                if end > last_end:
                    spans[-1] = (last_start, end)
            else:
                spans.append((start, end))
        return spans

    def scrub(self, value: Any) -> Any:
        """``value`` (a string, a struct, a dataclass, a list or dict of them) with every
        string's matches replaced; the same object when nothing matched."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, msgspec.Struct):
            changes = self._changed(value, value.__struct_fields__)
            return msgspec.structs.replace(value, **changes) if changes else value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = [f.name for f in dataclasses.fields(value) if f.init]
            changes = self._changed(value, fields)
            return dataclasses.replace(value, **changes) if changes else value
        if isinstance(value, dict):
            scrubbed = {self.scrub(k): self.scrub(v) for k, v in value.items()}
            return scrubbed if scrubbed != value else value
        if isinstance(value, (list, tuple)):
            items = [self.scrub(v) for v in value]
            if items == list(value):
                return value
            return type(value)(items)
        return value

    def _changed(self, value: Any, fields: Iterable[str]) -> dict[str, Any]:
        changes = {}
        for field in fields:
            old = getattr(value, field)
            new = self.scrub(old)
            if new is not old and new != old:
                changes[field] = new
        return changes

    # -- streams ---------------------------------------------------------------------

    def _feed(self, stream: _Stream, piece: str) -> str:
        """What of ``stream``, with ``piece`` added, can be shown now, redacted."""
        text = (stream.run or "") + stream.tail + piece
        out, shown, redacted = self._redacted(text, len(stream.run or ""))
        if shown == len(text) and redacted < shown:  # the key may go on in the next piece
            stream.run, stream.tail = _context(text[redacted:]), ""
            return "".join(out)
        keep = max(shown, len(text) - self.hold)
        out.append(text[shown:keep])
        # What was replaced last stays beside the held characters while nothing shown
        # stands between them: a key may start inside it (``xoxb-...`` swallowing the
        # start of ``hf_...``) and go on in them.
        adjacent = keep == shown and redacted < shown
        stream.run = _context(text[redacted:shown]) if adjacent else None
        stream.tail = text[keep:]
        return "".join(out)

    def _redacted(self, text: str, shown: int) -> tuple[list[str], int, int]:
        """``text`` from ``shown`` on, to the end of its last match, redacted (matches
        that began before ``shown`` were replaced already: the rest of them is dropped);
        where that end is, and where the run of text replaced there began."""
        out: list[str] = []
        redacted = 0
        for start, end in self._spans(text):
            if end <= shown:
                continue
            if start >= shown:
                out += (text[shown:start], self.replacement)
                redacted = start
            shown = end
        return out, shown, redacted

    def _end(self, stream: _Stream) -> str:
        """The rest of a stream that has ended, redacted."""
        text = (stream.run or "") + stream.tail
        out, shown, _ = self._redacted(text, len(stream.run or ""))
        out.append(text[shown:])
        stream.run, stream.tail = None, ""
        return "".join(out)

    def _settled(self, text: str) -> str:
        """``text`` redacted, less its last characters where a key may be beginning (a
        string still streaming)."""
        return self._feed(_Stream(), text)

    def _partial(self, value: Any, *, last: bool = True) -> Any:
        """A partial typed output redacted: its last string is still streaming."""
        if isinstance(value, str):
            return self._settled(value) if last else self.text(value)
        if isinstance(value, dict):
            final = len(value) - 1
            return {
                self.scrub(k): self._partial(v, last=last and i == final)
                for i, (k, v) in enumerate(value.items())
            }
        if isinstance(value, list):
            final = len(value) - 1
            return [self._partial(v, last=last and i == final) for i, v in enumerate(value)]
        return value

    # -- middleware methods ----------------------------------------------------------

    async def on_request(
        self, ctx: MiddlewareContext, request: ProviderRequest
    ) -> ProviderRequest | None:
        """The system prompt redacted (the messages come from the history: redacted)."""
        system = request.system_prompt
        if not system:
            return None
        kept = self.text(system)
        return None if kept == system else msgspec.structs.replace(request, system_prompt=kept)

    async def on_event(self, ctx: MiddlewareContext, event: ChatEvent) -> list[ChatEvent]:
        """Streamed pieces held back as little as a key needs and redacted; other events
        redacted, after what the streams held."""
        streams: dict[Any, _Stream] = ctx.state.setdefault(self._state, {})
        kind = type(event)
        if kind is TextEvent or kind is ThinkingEvent:
            stream = streams.get(kind)
            if stream is None:
                stream = streams[kind] = _Stream()
            shown = self._feed(stream, event.text)  # type: ignore[union-attr]
            return [kind(shown)] if shown else []
        if kind is ToolCallDeltaEvent:
            delta: ToolCallDeltaEvent = event  # type: ignore[assignment]
            stream = streams.get(delta.index)
            if stream is None:
                stream = streams[delta.index] = _Stream()
            shown = self._feed(stream, delta.arguments_delta)
            if not shown and delta.id is None and delta.name is None:
                return []
            return [self.scrub(msgspec.structs.replace(delta, arguments_delta=shown))]
        if kind is PartialOutputEvent:
            return [PartialOutputEvent(self._partial(event.value))]  # type: ignore[union-attr]
        if kind is NoticeEvent:  # said beside the streams, which go on
            return [self.scrub(event)]
        out = self._ended(streams)
        out.append(event if kind is FinishEvent else self._scrubbed(event))
        return out

    def on_message(self, ctx: MiddlewareContext, message: Message) -> Message:
        """The message the history (and the log) keeps, redacted."""
        # Plain, not async: a reply cut short is kept through plain methods only.
        scrubbed: Message = self.scrub(message)
        return scrubbed

    def _ended(self, streams: dict[Any, _Stream]) -> list[ChatEvent]:
        out: list[ChatEvent] = []
        for key, stream in streams.items():
            rest = self._end(stream)
            if not rest:
                continue
            if isinstance(key, int):
                out.append(ToolCallDeltaEvent(key, arguments_delta=rest))
            else:
                out.append(key(rest))
        streams.clear()
        return out

    def _scrubbed(self, event: ChatEvent) -> ChatEvent:
        if type(event) is OutputEvent:
            # The value is the caller's typed object, not an event field msgspec knows.
            return OutputEvent(self.scrub(event.value))
        scrubbed: ChatEvent = self.scrub(event)
        return scrubbed


class _Stream:
    """What one stream holds: its last characters not shown yet, and the key it is in
    (its text so far, at most ``_RUN_CONTEXT`` of it) when one reached its end."""

    __slots__ = ("run", "tail")

    def __init__(self) -> None:
        self.tail = ""
        self.run: str | None = None


def _shortest(pattern: str) -> int:
    """The length of ``pattern``'s shortest match (``_UNKNOWN_HOLD`` if it cannot tell)."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        low = int(_parser.parse(pattern).getwidth()[0])
    except Exception:
        return _UNKNOWN_HOLD
    return low if low > 0 else _UNKNOWN_HOLD


def _context(run: str) -> str:
    if len(run) <= _RUN_CONTEXT:
        return run
    half = _RUN_CONTEXT // 2
    return run[:half] + run[-half:]
