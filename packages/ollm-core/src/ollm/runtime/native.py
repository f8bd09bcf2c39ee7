"""The native tool-calling strategy: tools go to the provider in its own format."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ollm.types.events import ProviderEvent
from ollm.types.messages import Message
from ollm.types.provider import ProviderAdapter
from ollm.types.request import ProviderRequest
from ollm.types.strategy import ReplyReview

__all__ = ["NativeStrategy"]


class NativeStrategy:
    """Hands the request to the provider as it is; the provider's stream is the reply."""

    name = "native"

    def prepare(self, request: ProviderRequest) -> ProviderRequest:
        """The request as it is: the provider takes the tools in its own format."""
        return request

    def stream(
        self, provider: ProviderAdapter, request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        """The provider's stream, as it is."""
        # The provider's own iterator, unwrapped: no extra layer on the hot path.
        return provider.chat_stream(request)

    def review(self, reply: Message) -> ReplyReview | None:
        """Nothing to judge: the provider's tool calls are the calls."""
        return None

    def wrap_up(self, request: ProviderRequest) -> ProviderRequest | None:
        """No last request at the turn limit: the chat ends with ``max_turns``."""
        return None
