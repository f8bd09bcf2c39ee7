"""BASELINE ONLY, never shipped: the ``redact`` middleware before issue 40.

Kept so that ``bench_redact.py`` measures the streaming matcher against it on the same
machine, in the same run. It lets a key cut between pieces through after 512 characters
without whitespace, and leaves call arguments and partial output unredacted (issue 40,
items 7 and 8); do not use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import msgspec

from ollm.types.events import ChatEvent, FinishEvent, TextEvent, ThinkingEvent
from ollm.types.messages import Message
from ollm.types.middleware import MiddlewareContext

__all__ = ["LegacyRedact"]

DEFAULT_PATTERNS: tuple[str, ...] = (
    r"sk-[A-Za-z0-9_-]{16,}",  # OpenAI and Anthropic keys (sk-..., sk-proj-..., sk-ant-...)
    r"AIza[0-9A-Za-z_-]{35}",  # Google API keys
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{30,}",  # GitHub fine-grained tokens
    r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab tokens
    r"xox[abprs]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key ids
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face tokens
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",  # JSON Web Tokens
)
"""The secrets ``Redact()`` removes unless given other patterns."""

REPLACEMENT = "[REDACTED]"
# Text held back waiting for whitespace is let go past this length (a long word is no
# key, and holding it longer would stall the screen).
_HOLD_LIMIT = 512


class LegacyRedact:
    """A middleware that replaces what ``patterns`` match with ``replacement``.

    ``patterns`` are regular expressions (``DEFAULT_PATTERNS`` unless given; pass
    ``[*DEFAULT_PATTERNS, r"my-secret-\\w+"]`` to add yours).
    """

    name = "redact"

    def __init__(
        self, patterns: Iterable[str] | None = None, *, replacement: str = REPLACEMENT
    ) -> None:
        chosen = tuple(DEFAULT_PATTERNS if patterns is None else patterns)
        if not chosen:
            raise ValueError("Redact needs at least one pattern")
        self.pattern = re.compile("|".join(f"(?:{p})" for p in chosen))
        self.replacement = replacement

    def text(self, text: str) -> str:
        """``text`` with every match replaced."""
        return self.pattern.sub(self.replacement, text)

    def scrub(self, value: Any) -> Any:
        """``value`` (a string, a struct, a list or dict of them) with every string's
        matches replaced; the same object when nothing matched."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, msgspec.Struct):
            changes = {}
            for field in value.__struct_fields__:
                old = getattr(value, field)
                new = self.scrub(old)
                if new is not old and new != old:
                    changes[field] = new
            return msgspec.structs.replace(value, **changes) if changes else value
        if isinstance(value, dict):
            scrubbed = {k: self.scrub(v) for k, v in value.items()}
            return scrubbed if scrubbed != value else value
        if isinstance(value, (list, tuple)):
            items = [self.scrub(v) for v in value]
            if items == list(value):
                return value
            return type(value)(items)
        return value

    # -- middleware methods ----------------------------------------------------------

    def on_event(self, ctx: MiddlewareContext, event: ChatEvent) -> list[ChatEvent]:
        """Streamed text held back to whole words and redacted; other events redacted."""
        held: dict[type, str] = ctx.state.setdefault("redact", {})
        kind = type(event)
        if kind is TextEvent or kind is ThinkingEvent:
            out = self._flush(held, ThinkingEvent if kind is TextEvent else TextEvent)
            text = held.pop(kind, "") + event.text  # type: ignore[union-attr]
            tail = len(text) - 1 - _last_space(text)  # the characters after it
            if 0 < tail <= _HOLD_LIMIT:
                held[kind] = text[-tail:]
                text = text[:-tail]
            if text:
                out.append(kind(self.text(text)))
            return out
        out = self._flush(held, TextEvent) + self._flush(held, ThinkingEvent)
        out.append(event if kind is FinishEvent else self.scrub(event))
        return out

    def on_message(self, ctx: MiddlewareContext, message: Message) -> Message:
        """The message the history (and the log) keeps, redacted."""
        scrubbed: Message = self.scrub(message)
        return scrubbed

    def _flush(self, held: dict[type, str], kind: type) -> list[ChatEvent]:
        text = held.pop(kind, "")
        return [kind(self.text(text))] if text else []


def _last_space(text: str) -> int:
    """The index of the last whitespace character of ``text`` (-1 when there is none)."""
    for index in range(len(text) - 1, -1, -1):
        if text[index].isspace():
            return index
    return -1
