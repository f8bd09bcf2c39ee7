"""What a test scripts the fake Messages API to answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ollm_testutils.fake_openai._script import AUTO

__all__ = ["AnthropicReply", "AnthropicThinking", "AnthropicToolUse", "anthropic_error"]


@dataclass(frozen=True)
class AnthropicToolUse:
    """A ``tool_use`` block of a scripted reply.

    ``input`` may be anything JSON (the API sends an object; a test may send worse);
    ``pieces`` is how many ``input_json_delta`` events carry its JSON text, or ``raw``
    the exact pieces of that text (``input`` is then not used). ``id`` is ``AUTO``
    (``toolu_`` and a number) or the id to send.
    """

    name: str
    input: Any = field(default_factory=dict)
    id: str | None = AUTO
    pieces: int = 3
    raw: Sequence[str] | None = None


@dataclass(frozen=True)
class AnthropicThinking:
    """A ``thinking`` block (its ``text`` in pieces, then its ``signature``), or with
    ``redacted`` set a ``redacted_thinking`` block carrying that data.

    ``signature`` is ``AUTO`` (one the server makes from the text) or the one to send;
    the server remembers every signature it sent and refuses a thinking block that comes
    back with any other (as the API does).
    """

    text: str | Sequence[str] = ()
    signature: str = AUTO
    redacted: str | None = None

    @property
    def pieces(self) -> list[str]:
        """The thinking as its pieces."""
        return [self.text] if isinstance(self.text, str) else list(self.text)


ToolUseLike = AnthropicToolUse | tuple[str, Mapping[str, Any]]


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    """An error body: ``{"type": "error", "error": {"type", "message"}, "request_id"}``."""
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_fake",
    }


@dataclass
class AnthropicReply:
    """One scripted reply to ``POST /v1/messages``.

    - ``thinking``: thinking blocks first (a string is one block of one piece);
    - ``text``: pieces, one ``text_delta`` each, in one text block;
    - ``tool_uses``: ``tool_use`` blocks after the text (parallel calls);
    - ``stop_reason``: ``AUTO`` is ``tool_use`` with calls, else ``end_turn``; also
      ``max_tokens``, ``stop_sequence``, ``pause_turn``, ``refusal``; ``None`` sends none;
    - ``usage``: ``(input, output)``; ``AUTO`` counts characters / 4; ``cache_read`` and
      ``cache_creation`` add the prompt cache's counts;
    - ``ping``: a ``ping`` event after ``message_start``, as the API sends;
    - ``end``: ``"done"`` ends the body, ``"cut"`` closes the connection after the text;
    - ``delay`` before the head, ``chunk_delay`` between events, ``hang`` after the text;
    - ``status``, ``error`` and ``headers``: an error reply
      (``AnthropicReply.failure(...)``); ``midstream_error``: an ``error`` event after
      the text;
    - ``raw``: bytes written as the body instead (hostile servers).
    """

    text: str | Sequence[str] = ()
    thinking: str | Sequence[AnthropicThinking | str] = ()
    tool_uses: Sequence[ToolUseLike] = ()
    stop_reason: str | None = AUTO
    usage: tuple[int, int] | None = AUTO
    cache_read: int | None = None
    cache_creation: int | None = None
    ping: bool = True
    end: Literal["done", "cut"] = "done"
    delay: float = 0.0
    chunk_delay: float = 0.0
    hang: bool = False
    status: int = 200
    error: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    midstream_error: Mapping[str, Any] | None = None
    raw: Sequence[bytes] | None = None

    @property
    def pieces(self) -> list[str]:
        """The text as its pieces."""
        return [self.text] if isinstance(self.text, str) else list(self.text)

    @property
    def thinking_blocks(self) -> list[AnthropicThinking]:
        """The thinking blocks, normalised."""
        given = [self.thinking] if isinstance(self.thinking, str) else list(self.thinking)
        return [t if isinstance(t, AnthropicThinking) else AnthropicThinking(t) for t in given]

    @property
    def calls(self) -> list[AnthropicToolUse]:
        """The tool uses, normalised."""
        return [
            c if isinstance(c, AnthropicToolUse) else AnthropicToolUse(c[0], c[1])
            for c in self.tool_uses
        ]

    @classmethod
    def failure(
        cls, status: int, kind: str, message: str, *, headers: Mapping[str, str] | None = None
    ) -> AnthropicReply:
        """An error reply of ``status`` with the error ``kind`` (``rate_limit_error``...)."""
        return cls(status=status, error=anthropic_error(kind, message), headers=headers or {})
