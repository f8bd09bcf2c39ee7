"""Reading a provider's stream safely: the abort guard, and what its failures become."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio

from ollm.errors import ErrorCode, OllmError
from ollm.types.abort import AbortSignal
from ollm.types.events import ErrorEvent, ProviderEvent

__all__ = ["error_event", "guarded", "not_an_event"]


async def guarded(
    stream: AsyncIterator[ProviderEvent], abort: AbortSignal
) -> AsyncIterator[ProviderEvent]:
    """Make a provider that does not watch the abort signal stop when it fires.

    A cancel scope per event is slow, so providers that watch the signal themselves
    (``handles_abort = True``) are not wrapped in this.
    """
    iterator = stream.__aiter__()
    try:
        while True:
            with abort.guard() as scope:
                try:
                    event = await iterator.__anext__()
                except StopAsyncIteration:
                    return
            if scope.cancelled_caught:
                return
            yield event
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            with anyio.CancelScope(shield=True):
                await aclose()


def error_event(exc: Exception, provider: str) -> ErrorEvent:
    """The error event for an exception a provider's stream raised (it should not)."""
    if isinstance(exc, OllmError):
        return ErrorEvent(exc.message, exc.code)
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return ErrorEvent(f"Provider {provider!r} failed: {detail}", ErrorCode.PROVIDER_ERROR)


def not_an_event(event: object, provider: str) -> ErrorEvent:
    """The error event for something a provider yielded that is not a provider event."""
    return ErrorEvent(
        f"Provider {provider!r} yielded {type(event).__name__}, which is not a provider event.",
        ErrorCode.BAD_RESPONSE,
    )
