"""What the runtime asks of a provider: the request and its options."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ollm.types.abort import AbortSignal
from ollm.types.messages import Message

__all__ = ["GenerationOptions", "ProviderRequest", "ToolChoice", "ToolSchema"]


class ToolSchema(msgspec.Struct, frozen=True, omit_defaults=True):
    """A tool as a model sees it: a name, what it does, and a JSON Schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class GenerationOptions(msgspec.Struct, frozen=True, omit_defaults=True):
    """Sampling and size options; ``None`` leaves the provider's own default.

    ``context_window`` asks the provider for a context of that many tokens (Ollama's
    ``num_ctx``) and is the window the runtime checks requests against.
    ``extra`` passes provider-specific options through untouched.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    repeat_penalty: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    context_window: int | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)

    def merged(self, other: GenerationOptions | None) -> GenerationOptions:
        """These options with every field that ``other`` sets taking precedence."""
        if other is None:
            return self
        changes: dict[str, Any] = {}
        for field in self.__struct_fields__:
            value = getattr(other, field)
            if field == "extra":
                if value:
                    changes["extra"] = {**self.extra, **value}
            elif value is not None:
                changes[field] = value
        return msgspec.structs.replace(self, **changes) if changes else self


ToolChoice = Literal["auto", "none", "required"] | str
"""``"auto"``, ``"none"`` (offer no tools), ``"required"``, or the name of one tool."""


class ProviderRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    """One request to a provider.

    ``messages`` never contains the system prompt: it travels in ``system_prompt`` and
    each provider places it where its API wants it. ``response_format`` is ``"json"``
    or a JSON Schema; ``think`` turns a model's reasoning on or off (``True``,
    ``False``, or a level such as ``"high"``). A provider stops promptly when
    ``abort`` fires. ``tool_call_deltas`` asks a provider whose server streams tool
    calls' arguments to yield a ``ToolCallDeltaEvent`` for each piece (the whole call
    follows as usual); others ignore it. ``headers`` are HTTP headers a provider that
    speaks HTTP adds to this request (after its own): a middleware's ``on_request``
    sets them, such as the W3C ``traceparent`` of a trace; others ignore them.

    ``conversation_id`` names the conversation the request belongs to (the runtime
    fills it with ``Conversation.id``; ``None`` for a request made by hand): the same
    for every turn of one conversation, so that a pool of servers, or a router in front
    of them, can send the turns to the server whose prompt cache holds its beginning.
    A provider sends it only when asked (``affinity_header``).
    """

    model: str
    messages: tuple[Message, ...]
    system_prompt: str | None = None
    tools: tuple[ToolSchema, ...] = ()
    tool_choice: str = "auto"
    options: GenerationOptions = msgspec.field(default_factory=GenerationOptions)
    response_format: str | dict[str, Any] | None = None
    think: bool | str | None = None
    abort: AbortSignal | None = None
    tool_call_deltas: bool = False
    conversation_id: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
