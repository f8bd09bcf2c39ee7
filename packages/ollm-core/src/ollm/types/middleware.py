"""What middleware sees and answers: the chat's context, and the verdicts on a tool call.

A middleware is any object with one or more of these methods, each ``async`` or plain
(a plain one runs in a daemon thread); ``ctx`` is the chat's ``MiddlewareContext``:

- ``on_request(ctx, request) -> request``: before each request to the provider (it may
  change the model, the options, the messages or the tools);
- ``on_event(ctx, event) -> event | None | list[event]``: each event on its way to the
  caller (transform it, drop it, or emit several, such as text held back);
- ``before_tool_call(ctx, call) -> call | Deny | Ask``: before a tool runs (rewrite its
  arguments, refuse it, or have a person asked);
- ``after_tool_call(ctx, call, result) -> result``: the tool's ``ToolResult``;
- ``on_message(ctx, message) -> message``: each message as it enters the history;
- ``on_finish(ctx, finish)``: once, when the chat ends (``cancelled`` when the caller
  left before the end: a ``break``, a closed stream).

See the hook ``ollm_middleware`` and the "Middleware" section of docs/plugins.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

if TYPE_CHECKING:
    from ollm.types.messages import Message
    from ollm.types.provider import ProviderAdapter

__all__ = [
    "MIDDLEWARE_METHODS",
    "ApprovalScope",
    "Approve",
    "Ask",
    "ChatHistory",
    "ClientRegistries",
    "ClientSettings",
    "Deny",
    "MiddlewareClient",
    "MiddlewareContext",
    "ProviderLookup",
    "check_middleware",
    "is_middleware",
]

MIDDLEWARE_METHODS = (
    "on_request",
    "on_event",
    "before_tool_call",
    "after_tool_call",
    "on_message",
    "on_finish",
)
"""The methods a middleware may have (it has at least one)."""


def is_middleware(value: object) -> bool:
    """Whether ``value`` has at least one middleware method."""
    return any(callable(getattr(value, name, None)) for name in MIDDLEWARE_METHODS)


def check_middleware(items: object) -> tuple[str | object, ...]:
    """The middleware a client or chat was given, checked: names, or objects that have
    at least one middleware method."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError("middleware must be a list of names or middleware objects")
    for item in items:
        if isinstance(item, str):
            if not item.strip():
                raise ValueError("a middleware name cannot be empty")
            continue
        if not is_middleware(item):
            methods = ", ".join(MIDDLEWARE_METHODS)
            raise TypeError(f"{item!r} is not a middleware: it has none of the methods {methods}")
    return tuple(items)


ApprovalScope = Literal["once", "chat", "client"]
"""How far an approval reaches: this call, every call of the tool in this chat, or in
every chat of the client."""


class Deny(msgspec.Struct, frozen=True):
    """A tool call must not run: ``message`` goes back to the model as the call's
    result, and the chat goes on."""

    message: str = "it was refused"


class Ask(msgspec.Struct, frozen=True):
    """A person must approve this tool call first (``reason`` says why they are asked).

    The chat emits an ``ApprovalRequestEvent``; the answer comes from the client's
    ``approver`` or from ``stream.approve(id)`` / ``stream.deny(id)``.
    """

    reason: str = ""


class Approve(msgspec.Struct, frozen=True):
    """A person's yes to an approval request: for this call only (``once``), for the
    tool in this chat (``chat``) or in every chat of the client (``client``); ``args``
    replaces the call's arguments (the history keeps the model's as well)."""

    scope: ApprovalScope = "once"
    args: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.scope not in ("once", "chat", "client"):
            raise ValueError(f"scope must be 'once', 'chat' or 'client', not {self.scope!r}")
        if self.args is not None and not isinstance(self.args, dict):
            raise TypeError("args must be a dict of the call's arguments, or None")


# The contracts sit under the runtime, so they name the client and the conversation by
# what a middleware may use of them (ChatClient and Conversation are such objects).


class ProviderLookup(Protocol):
    """The providers a client can reach, by name (``ollm.ProviderRegistry`` is one)."""

    def get(self, name: str | None = None) -> ProviderAdapter:
        """The provider called ``name``, or the default one when ``name`` is ``None``."""
        ...


class ClientRegistries(Protocol):
    """What a middleware may read of the client's registries (``ollm.Registries``)."""

    @property
    def providers(self) -> ProviderLookup:
        """The providers by name."""
        ...


class ClientSettings(Protocol):
    """What a middleware may read of the client's settings: the provider and model it
    names (``None``: the default)."""

    @property
    def provider(self) -> str | ProviderAdapter | None:
        """A registered name, a provider object, or ``None`` for the default."""
        ...

    @property
    def model(self) -> str | None:
        """The model name, or ``None`` for the provider's default."""
        ...


class MiddlewareClient(Protocol):
    """What a middleware may use of the client that runs its chat (an ``ollm.ChatClient``):
    its settings, its registries and its toolsets."""

    @property
    def settings(self) -> ClientSettings:
        """The client's settings."""
        ...

    @property
    def registries(self) -> ClientRegistries:
        """The client's registries (plugins are discovered the first time)."""
        ...

    @property
    def toolsets(self) -> Sequence[object]:
        """The client's toolsets (``ollm.Toolset`` objects)."""
        ...


class ChatHistory(Protocol):
    """What a middleware may read of the conversation (an ``ollm.Conversation``)."""

    @property
    def id(self) -> str:
        """The conversation's id."""
        ...

    @property
    def messages(self) -> tuple[Message, ...]:
        """The messages, in order (a snapshot)."""
        ...


class MiddlewareContext:
    """The chat a middleware method is called for.

    ``client`` is the ``ChatClient`` (typed as ``MiddlewareClient``: what a middleware
    may use of it); ``conversation`` the history (a ``ChatHistory``; ``conversation_id``
    its id); ``turn`` the number of the current request (0 before the first);
    ``provider`` and ``model`` the names in use (empty until known), ``adapter`` the
    provider object itself (``None`` until known: a middleware may call its optional
    methods, such as ``embed``, checking first that it has them). ``state`` is a
    dict for the middleware's own notes about this chat (key it by your name).
    ``middleware`` is the chat's middleware objects, the outermost first (a middleware
    that records content applies the chat's redaction with it:
    ``ollm.middleware.redaction(ctx)``).
    """

    __slots__ = (
        "adapter",
        "client",
        "conversation",
        "middleware",
        "model",
        "provider",
        "state",
        "turn",
    )

    def __init__(self, client: MiddlewareClient, conversation: ChatHistory) -> None:
        self.client = client
        self.conversation = conversation
        self.turn = 0
        self.provider = ""
        self.adapter: ProviderAdapter | None = None
        self.model = ""
        self.state: dict[str, Any] = {}
        self.middleware: tuple[object, ...] = ()

    @property
    def conversation_id(self) -> str:
        """The conversation's id (``Conversation.id``)."""
        return self.conversation.id

    def __repr__(self) -> str:
        return (
            f"<MiddlewareContext conversation={self.conversation_id} turn={self.turn} "
            f"provider={self.provider!r} model={self.model!r}>"
        )
