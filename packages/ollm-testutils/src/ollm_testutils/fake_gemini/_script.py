"""What a test scripts the fake Gemini API to answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ollm_testutils.fake_openai._script import AUTO

__all__ = ["GeminiCall", "GeminiReply", "google_error"]


@dataclass(frozen=True)
class GeminiCall:
    """A function call in a scripted reply.

    ``args`` may be anything JSON (the API sends an object; a test may send worse).
    ``id`` is sent when given (newer models give one). ``signature`` is the part's
    ``thoughtSignature``: ``AUTO`` gives the first call of a reply one, as thinking
    models do, ``None`` none.
    """

    name: str
    args: Any = field(default_factory=dict)
    id: str | None = None
    signature: str | None = AUTO


CallLike = GeminiCall | tuple[str, Mapping[str, Any]]


def google_error(
    code: int,
    message: str,
    status: str,
    details: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A ``google.rpc.Status`` error body: ``{"error": {code, message, status, details}}``."""
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = [dict(d) for d in details]
    return {"error": error}


@dataclass
class GeminiReply:
    """One scripted reply to ``generateContent`` / ``streamGenerateContent``.

    - ``text``, ``thoughts``: pieces, one streamed event each (thoughts first, as
      ``thought: true`` parts);
    - ``calls``: function calls, all in one event after the text, or ``calls_per_event``
      to a streamed event;
    - ``finish_reason``: ``AUTO`` is ``STOP``; also ``MAX_TOKENS``, ``SAFETY``,
      ``RECITATION``, ``MALFORMED_FUNCTION_CALL``...; ``None`` sends none;
      ``finish_message`` and ``safety_ratings`` go with it;
    - ``block_reason``: the prompt is blocked (``promptFeedback``, no candidates);
    - ``usage``: ``(prompt, candidates)`` or ``(prompt, candidates, thoughts)``;
      ``AUTO`` counts characters / 4; ``cached`` adds ``cachedContentTokenCount``;
    - ``end``: ``"done"`` ends the body, ``"cut"`` closes the connection after the text;
    - ``delay`` before the head, ``chunk_delay`` between events, ``hang`` after the text;
    - ``status`` and ``error``: an error reply (``GeminiReply.failure(...)``);
      ``midstream_error``: an ``{"error": ...}`` event after the text;
    - ``raw``: bytes written as the body instead (hostile servers).
    """

    text: str | Sequence[str] = ()
    thoughts: str | Sequence[str] = ()
    calls: Sequence[CallLike] = ()
    calls_per_event: int | None = None
    finish_reason: str | None = AUTO
    finish_message: str | None = None
    safety_ratings: Sequence[Mapping[str, Any]] = ()
    block_reason: str | None = None
    usage: tuple[int, ...] | None = AUTO
    cached: int | None = None
    end: Literal["done", "cut"] = "done"
    delay: float = 0.0
    chunk_delay: float = 0.0
    hang: bool = False
    status: int = 200
    error: Mapping[str, Any] | None = None
    midstream_error: Mapping[str, Any] | None = None
    raw: Sequence[bytes] | None = None

    @property
    def pieces(self) -> list[str]:
        """The text as its pieces."""
        return [self.text] if isinstance(self.text, str) else list(self.text)

    @property
    def thought_pieces(self) -> list[str]:
        """The thoughts as their pieces."""
        return [self.thoughts] if isinstance(self.thoughts, str) else list(self.thoughts)

    @property
    def function_calls(self) -> list[GeminiCall]:
        """The calls, normalised."""
        return [c if isinstance(c, GeminiCall) else GeminiCall(c[0], c[1]) for c in self.calls]

    @classmethod
    def failure(
        cls,
        code: int,
        message: str,
        status: str,
        *,
        reason: str | None = None,
        retry_delay: str | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> GeminiReply:
        """An error reply in Google's shape, with ``ErrorInfo``/``RetryInfo``/``BadRequest``."""
        details: list[dict[str, Any]] = []
        if reason is not None:
            details.append(
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": reason,
                    "domain": "googleapis.com",
                }
            )
        if retry_delay is not None:
            details.append(
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
            )
        if fields:
            details.append(
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [
                        {"field": name, "description": text} for name, text in fields.items()
                    ],
                }
            )
        return cls(status=code, error=google_error(code, message, status, details))
