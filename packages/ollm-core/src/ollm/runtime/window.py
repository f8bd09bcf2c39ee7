"""The context window of a chat: what a cut prompt does to it (``on_truncation``).

Internal: not part of ollm's public API; its layout may change in any release.
"""

from __future__ import annotations

from ollm.errors import ErrorCode
from ollm.types.events import ErrorEvent, NoticeEvent

__all__ = ["ON_TRUNCATION", "TRUNCATED", "check_on_truncation", "truncation_error"]

# The kind of notice a provider gives with a reply its server evaluated from a prompt
# it had cut to fit the window (Ollama's guard).
TRUNCATED = "context_truncated"
ON_TRUNCATION = ("notice", "error")


def check_on_truncation(value: object) -> str:
    """``value`` if it is a choice of ``on_truncation``, else ``ValueError`` naming them."""
    if value not in ON_TRUNCATION:
        raise ValueError(f'on_truncation must be "notice" or "error", not {value!r}')
    return str(value)


def truncation_error(notice: NoticeEvent) -> ErrorEvent:
    """The error that ends a chat on a cut prompt, with ``on_truncation="error"``."""
    return ErrorEvent(
        f"{notice.message} The chat stopped here, as on_truncation asks (--on-truncation "
        "error); the reply stays in the history, marked incomplete.",
        ErrorCode.CONTEXT_EXCEEDED,
    )
