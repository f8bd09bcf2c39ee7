"""The context window of a chat: what a cut prompt does (``on_truncation``), and the
window chosen for each request (``context_window="auto"``).

Internal: not part of ollm's public API; its layout may change in any release.
"""

from __future__ import annotations

from ollm.errors import ErrorCode
from ollm.types.events import ErrorEvent, NoticeEvent

__all__ = [
    "AUTO",
    "ON_TRUNCATION",
    "TRUNCATED",
    "AutoWindow",
    "bucket_for",
    "check_on_truncation",
    "truncation_error",
]

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


# -- context_window="auto" ----------------------------------------------------------

AUTO = "auto"
SMALLEST_BUCKET = 4096


def bucket_for(needed: int) -> int:
    """The smallest power of two from 4096 that holds ``needed`` tokens."""
    bucket = SMALLEST_BUCKET
    while bucket < needed:
        bucket *= 2
    return bucket


class AutoWindow:
    """``context_window="auto"``: the window a request asks for (Ollama's ``num_ctx``),
    grown in buckets to fit the prompt and the reply.

    Each change of ``num_ctx`` makes Ollama load the model again (seconds), so the
    window takes few values: powers of two from 4096, never below what is loaded
    (``loaded``), at most the trained length (``trained``), and never smaller than the
    last one of this client for this model (``store``, shared by the client's chats).
    """

    def __init__(
        self,
        store: dict[tuple[str, str], int],
        key: tuple[str, str],
        loaded: int | None,
        trained: int | None,
    ) -> None:
        self.store = store
        self.key = key
        self.model = key[1]
        self.loaded = loaded
        self.trained = trained
        floor = max(store.get(key, 0), loaded or 0)
        self.window = self._capped(max(floor, SMALLEST_BUCKET))

    def _capped(self, window: int) -> int:
        return min(window, self.trained) if self.trained else window

    def fit(self, needed: int) -> NoticeEvent | None:
        """Grow the window to hold ``needed`` tokens (prompt and reply) if it must; the
        ``context_resized`` notice when it changed from the one last asked for."""
        before = self.store.get(self.key, self.loaded)
        if needed > self.window:
            self.window = self._capped(max(self.window, bucket_for(needed)))
        self.store[self.key] = self.window
        if before == self.window:
            return None
        limit = f" (the model's longest is {self.trained})" if self.trained else ""
        start = (
            f"Context window for {self.model}: {self.window} tokens{limit}"
            if before is None
            else f"Context window for {self.model} grown from {before} to {self.window} "
            f"tokens{limit}, for a request of about {needed}"
        )
        return NoticeEvent(
            f"{start}; the server loads the model again with it, which can take a moment.",
            "context_resized",
        )
