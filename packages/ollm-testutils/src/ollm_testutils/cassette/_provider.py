"""An in-process provider (no HTTP to record) recorded at the level of its events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import msgspec

import ollm
from ollm_testutils.cassette._format import Episode, key_of, normalise_volatile

if TYPE_CHECKING:
    from ollm_testutils.cassette._cassette import Cassette

__all__ = ["CassetteProvider"]

# Fields of a request that are not what was asked: a signal, a per-conversation id,
# headers a middleware adds (a trace's), none of which changes the reply.
_NOT_KEYED = ("abort", "conversation_id", "headers")


class CassetteProvider:
    """A provider that replays the events a real one (built by ``factory``) yielded."""

    def __init__(self, cassette: Cassette, factory: Callable[[], Any], name: str) -> None:
        self.name = name
        self._cassette = cassette
        self._factory = factory
        self._inner: Any = None

    def canonical(self, request: ollm.ProviderRequest) -> dict[str, Any]:
        """The request as its key sees it."""
        data = msgspec.to_builtins(msgspec.structs.replace(request, abort=None))
        for field in _NOT_KEYED:
            data.pop(field, None)
        scrubbed = self._cassette.scrubber.json(data)
        from ollm_testutils.cassette._wires import DEFAULT_VOLATILE

        return {"provider": self.name, **normalise_volatile(scrubbed, DEFAULT_VOLATILE)}

    async def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        cassette = self._cassette
        canonical = self.canonical(request)
        episode = cassette.take(key_of(canonical))
        if episode is not None and episode.events is not None:
            for data in episode.events:
                yield ollm.decode_provider_event(msgspec.json.encode(data))
            return
        if not cassette.recording:
            message = cassette.miss(canonical)
            yield ollm.ErrorEvent(message=message, code="BAD_RESPONSE")
            yield ollm.FinishEvent(reason="error")
            return
        if self._inner is None:
            self._inner = self._factory()
        events: list[dict[str, Any]] = []
        stream = self._inner.chat_stream(request)
        try:
            async for event in stream:
                events.append(msgspec.to_builtins(event))
                yield event
        finally:
            # A client stops reading at the finish event and closes this stream: the
            # real provider's is closed too (it may hold its model's lock), and what
            # came is recorded.
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
            if events:
                cassette.add(Episode(canonical, events=events))
