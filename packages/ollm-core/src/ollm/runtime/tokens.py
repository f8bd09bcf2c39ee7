"""Token limits: count a request before it is sent, warn near the window, block above it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ollm.registries.tokens import TokenCounterRegistry, fallback_count
from ollm.types.provider import ProviderAdapter
from ollm.types.request import ProviderRequest

__all__ = ["WARN_RATIO", "TokenBudget", "count_request_tokens"]

WARN_RATIO = 0.9

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenBudget:
    """How a request fits: ``limit`` is the window less the tokens reserved for output."""

    estimated: int
    context_window: int
    reserved: int

    @property
    def limit(self) -> int:
        """Prompt tokens allowed."""
        return max(0, self.context_window - self.reserved)

    @property
    def blocked(self) -> bool:
        """The request does not fit: it must not be sent."""
        return self.estimated > self.limit

    @property
    def warn(self) -> bool:
        """The request fits but uses 90% or more of what is allowed."""
        return not self.blocked and self.estimated >= WARN_RATIO * self.limit

    def explain(self, model: str) -> str:
        """The error message for a blocked request."""
        reserve = (
            f" ({self.reserved} of its {self.context_window} reserved for the reply)"
            if self.reserved
            else ""
        )
        return (
            f"The request needs about {self.estimated} tokens, but {model} allows "
            f"{self.limit}{reserve}. Nothing was sent. Start a new conversation, shorten "
            "the prompt, or raise the context window (context_window=...)."
        )


async def count_request_tokens(
    request: ProviderRequest,
    provider: ProviderAdapter,
    counters: TokenCounterRegistry,
    fallback: Callable[[ProviderRequest], int] = fallback_count,
) -> int:
    """The provider's count, else a registered counter's, else ceil(characters / 4)
    (``fallback``: an ``IncrementalCount`` gives the same number at the cost of what
    each request adds)."""
    # An attribute check, not isinstance(provider, TokenCounting): a runtime-checkable
    # protocol costs tens of microseconds per check, on every request.
    count_tokens = getattr(provider, "count_tokens", None)
    if callable(count_tokens):
        try:
            count = await count_tokens(request)
        except Exception:
            log.warning("token counting by %r failed; estimating", provider.name, exc_info=True)
        else:
            if isinstance(count, int) and count > 0:
                return count
    counter = counters.get(request.model)
    if counter is not None:
        try:
            count = counter(request)
        except Exception:
            log.warning("token counter for %r failed; estimating", request.model, exc_info=True)
        else:
            if isinstance(count, int) and count > 0:
                return count
    return fallback(request)
