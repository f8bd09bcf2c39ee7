"""How a chat offers tools to a model: the contract a tool-calling strategy fulfils.

The built-in strategy, ``native``, hands the tools to the provider in its own format.
A plugin can register another through the ``ollm_tool_strategies`` hook; ``ollm-react``
registers ``react``, which describes the tools in the system prompt and parses the
model's text. The runtime creates one strategy object per chat, so a strategy may keep
state across the turns of that chat (for example a count of malformed replies).

A strategy that speaks a text protocol of its own (ReAct) sets the class attribute
``text_protocol = True``: a chat's typed output (``output=T``) is then asked for in the
prompt (the ``prompted`` output strategy) rather than as a JSON constraint, which would
forbid the protocol, and the reply the strategy's review keeps is the value.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

import msgspec

from ollm.types.events import ChatEvent, ErrorEvent, ProviderEvent
from ollm.types.messages import Message
from ollm.types.provider import ProviderAdapter
from ollm.types.request import ProviderRequest

__all__ = ["ReplyReview", "ToolStrategy"]


class ReplyReview(msgspec.Struct, frozen=True):
    """A strategy's verdict on one assistant reply, once its stream has ended.

    - ``message``: what goes into the history instead of the reply the runtime
      assembled from the events (for example a canonical rendering of a parsed reply).
      Its tool calls are the ones that run.
    - ``feedback``: the reply was malformed; no tool runs, this text goes into the
      history as a user message asking for a correction, and the chat takes another turn.
    - ``results``: call id to result text, for calls that must not run (each becomes
      an error result, for example a call repeated too many times).
    - ``error``: end the chat with this error (for example too many malformed replies).
    - ``events``: chat events to emit now (a notice, or text the user should see).
    """

    message: Message | None = None
    feedback: str | None = None
    results: dict[str, str] = msgspec.field(default_factory=dict)
    error: ErrorEvent | None = None
    events: tuple[ChatEvent, ...] = ()


@runtime_checkable
class ToolStrategy(Protocol):
    """One chat's way of offering tools to a model and reading its calls back."""

    @property
    def name(self) -> str:
        """The strategy's registry name (``native``, ``react``)."""
        ...

    def prepare(self, request: ProviderRequest) -> ProviderRequest:
        """The request as the provider will receive it from ``stream`` (tools rendered
        as text, say); the runtime counts the tokens of this one before sending."""
        ...

    def stream(
        self, provider: ProviderAdapter, request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        """Send ``request`` (tools included) through ``provider``; yield native events.

        Tool calls come out as ``ToolCallEvent`` whatever the model's format, and the
        text the user should see as ``TextEvent``.
        """
        ...

    def review(self, reply: Message) -> ReplyReview | None:
        """Judge the assembled reply; ``None`` accepts it as it is."""
        ...

    def wrap_up(self, request: ProviderRequest) -> ProviderRequest | None:
        """At the turn limit: one last request (without tools) for an answer, or ``None``."""
        ...
