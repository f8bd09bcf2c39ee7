"""Events: what a provider streams to the runtime, and what a chat streams to its caller.

Both are tagged unions (``type`` field), so a whole stream encodes to NDJSON with one
``msgspec.json.encode`` per event and decodes back with ``decode_chat_event`` or
``decode_provider_event``. Each class has that tag as a read-only class attribute too,
``event.type`` (``"text"``, ``"finish"``...), which type checkers narrow on. The events
that mean the same thing on both sides (text, thinking, notice, error, finish) are the
same classes.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec

from ollm.types.messages import ImagePart, ToolCall
from ollm.types.text import encode_json

__all__ = [
    "CHAT_EVENT_TYPES",
    "ApprovalRequestEvent",
    "ChatEvent",
    "CompactionEvent",
    "ErrorEvent",
    "FinishEvent",
    "FinishReason",
    "NoticeEvent",
    "OutputEvent",
    "PartialOutputEvent",
    "ProviderEvent",
    "TextEvent",
    "ThinkingEvent",
    "TokenWarningEvent",
    "ToolCallDeltaEvent",
    "ToolCallEvent",
    "ToolCallResultEvent",
    "ToolCallStartEvent",
    "ToolDecisionEvent",
    "TurnCompleteEvent",
    "Usage",
    "decode_chat_event",
    "decode_provider_event",
    "encode_event",
]

FinishReason = Literal["stop", "length", "max_turns", "cancelled", "token_limit", "error"]
"""Why a reply or a chat ended.

A provider reports ``stop`` or ``length`` (and ``cancelled`` or ``error`` when it must);
a chat may also end with ``max_turns``, ``cancelled``, ``token_limit`` or ``error``.
"""


class Usage(msgspec.Struct, frozen=True, omit_defaults=True):
    """Tokens used, and the provider's timings when it reports them (nanoseconds).

    ``completion_tokens`` counts every token the model wrote, its reasoning included;
    ``reasoning_tokens`` says how many of them were reasoning, and ``cached_tokens``
    how many prompt tokens came from the provider's cache, when it reports them;
    ``cache_creation_tokens`` how many were written to it (Anthropic's prompt cache,
    whose writes cost more than other prompt tokens).
    ``attempts`` is how many requests a provider that tries several servers (a pool)
    sent for the reply, the one that answered included; ``None`` from a provider that
    sends one. ``estimated`` is true when the server reported no usage and the counts
    are ollm's own (the provider's token count of the prompt and the reply; a sum is
    estimated when any of its parts is).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    total_duration_ns: int | None = None
    load_duration_ns: int | None = None
    prompt_eval_duration_ns: int | None = None
    eval_duration_ns: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    cache_creation_tokens: int | None = None
    attempts: int | None = None
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            total_duration_ns=_add(self.total_duration_ns, other.total_duration_ns),
            load_duration_ns=_add(self.load_duration_ns, other.load_duration_ns),
            prompt_eval_duration_ns=_add(
                self.prompt_eval_duration_ns, other.prompt_eval_duration_ns
            ),
            eval_duration_ns=_add(self.eval_duration_ns, other.eval_duration_ns),
            reasoning_tokens=_add(self.reasoning_tokens, other.reasoning_tokens),
            cached_tokens=_add(self.cached_tokens, other.cached_tokens),
            cache_creation_tokens=_add(self.cache_creation_tokens, other.cache_creation_tokens),
            attempts=_add(self.attempts, other.attempts),
            estimated=self.estimated or other.estimated,
        )


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


class _Event(msgspec.Struct, frozen=True, tag_field="type", omit_defaults=True):
    pass


class TextEvent(_Event, frozen=True, tag="text"):
    """A piece of the reply's text, as it arrives."""

    type: ClassVar[Literal["text"]] = "text"

    text: str


class ThinkingEvent(_Event, frozen=True, tag="thinking"):
    """A piece of the model's reasoning, when it shows it."""

    type: ClassVar[Literal["thinking"]] = "thinking"

    text: str


class ToolCallEvent(_Event, frozen=True, tag="tool_call"):
    """The model asked for a tool to run (provider side)."""

    type: ClassVar[Literal["tool_call"]] = "tool_call"

    call: ToolCall


class ToolCallDeltaEvent(_Event, frozen=True, tag="tool_call_delta"):
    """A piece of a tool call as the model writes it, for a UI that shows calls as they
    come (asked for with ``tool_call_deltas=True``; the call itself follows, whole, as
    ``ToolCallEvent`` / ``ToolCallStartEvent``).

    ``index`` tells a reply's parallel calls apart; ``id`` and ``name`` come with the
    first piece of a call (``None`` after); ``arguments_delta`` is the next piece of
    its arguments' JSON text. Providers whose servers stream arguments send these
    (OpenAI-compatible ones); the others send none.
    """

    type: ClassVar[Literal["tool_call_delta"]] = "tool_call_delta"

    index: int
    id: str | None = None
    name: str | None = None
    arguments_delta: str = ""


class NoticeEvent(_Event, frozen=True, tag="notice"):
    """Something worth telling the user that is not an error.

    ``kind`` is a stable short word: ``loading_model``, ``strategy``, ``retry``,
    ``failover`` (a pool moved the request to another server), ``tool_name`` (a toolset's
    tool renamed, its name being taken), ``info``.
    """

    type: ClassVar[Literal["notice"]] = "notice"

    message: str
    kind: str = "info"


class ErrorEvent(_Event, frozen=True, tag="error"):
    """Something failed. ``code`` is one of the stable codes of ``ollm.errors``.

    ``retry_after`` is the wait in seconds a server asked for before it is tried again
    (a ``RATE_LIMITED`` answer's ``Retry-After``), when it said one: a pool tries
    another server meanwhile.

    An ``OUTPUT_INVALID`` error (typed output that never validated) also carries the
    model's last reply as ``raw`` and what was wrong with it as ``errors``
    (``$.age: expected int, got str``).
    """

    type: ClassVar[Literal["error"]] = "error"

    message: str
    code: str
    retry_after: float | None = None
    raw: str | None = None
    errors: tuple[str, ...] = ()


class FinishEvent(_Event, frozen=True, tag="finish"):
    """The end of a reply (provider) or of a whole chat (runtime): exactly one, last."""

    type: ClassVar[Literal["finish"]] = "finish"

    reason: FinishReason
    usage: Usage | None = None


class ToolCallStartEvent(_Event, frozen=True, tag="tool_call_start"):
    """The model asked for a tool; it runs when the reply's stream has ended."""

    type: ClassVar[Literal["tool_call_start"]] = "tool_call_start"

    call: ToolCall
    turn: int = 0


class ToolCallResultEvent(_Event, frozen=True, tag="tool_call_result"):
    """A tool call's outcome: the text the model will read, or an error.

    ``images`` are the images the tool returned (an MCP server's screenshot...); they
    go into the tool message when the model can see images.
    """

    type: ClassVar[Literal["tool_call_result"]] = "tool_call_result"

    call: ToolCall
    result: str
    is_error: bool = False
    error_code: str | None = None
    duration_ms: float = 0.0
    turn: int = 0
    images: tuple[ImagePart, ...] = ()


class TokenWarningEvent(_Event, frozen=True, tag="token_warning"):
    """A request uses 90% or more of the tokens the context window allows."""

    type: ClassVar[Literal["token_warning"]] = "token_warning"

    estimated_tokens: int
    limit: int
    context_window: int

    @property
    def ratio(self) -> float:
        """How full the window is, 0.0 to 1.0."""
        return self.estimated_tokens / self.limit if self.limit else 1.0


class CompactionEvent(_Event, frozen=True, tag="compaction"):
    """The request about to be sent was compacted to fit the window: ``strategy`` (for
    example ``clear-results`` or ``trim``) left ``removed`` messages out of it (or
    shortened them), and it went from about ``tokens_before`` tokens to ``tokens_after``.

    Only what is sent changes: the conversation and its log keep every message.
    ``conversation_length`` is how many messages the conversation held then (where
    ``ollm logs show`` marks it).
    """

    type: ClassVar[Literal["compaction"]] = "compaction"

    strategy: str
    removed: int
    tokens_before: int
    tokens_after: int
    conversation_length: int = 0


class TurnCompleteEvent(_Event, frozen=True, tag="turn_complete"):
    """One request and its tool calls are done."""

    type: ClassVar[Literal["turn_complete"]] = "turn_complete"

    turn: int
    reason: FinishReason = "stop"
    tool_calls: int = 0
    usage: Usage | None = None


class ApprovalRequestEvent(_Event, frozen=True, tag="approval_request"):
    """A tool call waits for a person's answer before it runs (nothing has run yet).

    Answer with ``stream.approve(id)`` (``scope="chat"`` or ``"client"`` approves the
    tool's later calls too; ``args=`` runs it with other arguments) or
    ``stream.deny(id, message)``, or give the client an ``approver``. ``reason`` says
    why a person is asked (the rule, or the tool's own request).
    """

    type: ClassVar[Literal["approval_request"]] = "approval_request"

    call: ToolCall
    reason: str
    id: str


class ToolDecisionEvent(_Event, frozen=True, tag="tool_decision"):
    """Whether a tool call may run (``allow``) or not (``deny``), who decided and why.

    ``by`` is ``rule`` (an approval rule), ``tool`` (the tool's own default),
    ``default`` (the policy's), ``person`` (an answer to the stream), ``approver`` (the
    client's approver), ``chat`` or ``client`` (a person's earlier approval of the tool
    for the chat or the client), ``no one`` (a person should have been asked and could
    not be), or the name of the middleware that refused it. ``id`` is the approval
    request's, when a person was asked; ``scope`` how far their approval reaches.
    """

    type: ClassVar[Literal["tool_decision"]] = "tool_decision"

    call: ToolCall
    decision: Literal["allow", "deny"]
    by: str
    reason: str = ""
    scope: str = "once"
    id: str | None = None


class PartialOutputEvent(_Event, frozen=True, tag="partial_output"):
    """The typed output as far as it has streamed (``chat(..., output=T)``): best effort,
    never validated, never the result (that is the one ``OutputEvent``).

    ``value`` is the JSON object (or array) read so far, unfinished strings included.
    It is the reader's live view, which grows as the reply streams (copying it per
    piece would cost the whole value each time): copy it to keep a snapshot.
    """

    type: ClassVar[Literal["partial_output"]] = "partial_output"

    value: dict[str, Any] | list[Any]


class OutputEvent(_Event, frozen=True, tag="output"):
    """The typed output of a chat (``chat(..., output=T)``), validated: a ``T``.

    Exactly one, just before the ``FinishEvent``, when the model's answer matched
    (else an ``OUTPUT_INVALID`` error event comes instead). Encoded as NDJSON, ``value``
    is written as JSON.
    """

    type: ClassVar[Literal["output"]] = "output"

    value: Any


ProviderEvent = (
    TextEvent
    | ThinkingEvent
    | ToolCallEvent
    | ToolCallDeltaEvent
    | NoticeEvent
    | ErrorEvent
    | FinishEvent
)
"""What ``ProviderAdapter.chat_stream`` yields."""

ChatEvent = (
    TextEvent
    | ThinkingEvent
    | ToolCallDeltaEvent
    | ToolCallStartEvent
    | ToolCallResultEvent
    | TokenWarningEvent
    | CompactionEvent
    | TurnCompleteEvent
    | ApprovalRequestEvent
    | ToolDecisionEvent
    | PartialOutputEvent
    | OutputEvent
    | NoticeEvent
    | ErrorEvent
    | FinishEvent
)
"""What a chat yields to its caller."""

CHAT_EVENT_TYPES: tuple[type[ChatEvent], ...] = ChatEvent.__args__
"""The classes of ``ChatEvent``, for ``isinstance`` checks."""

_encoder = msgspec.json.Encoder()
_provider_decoder = msgspec.json.Decoder(ProviderEvent)
_chat_decoder = msgspec.json.Decoder(ChatEvent)


def encode_event(event: ProviderEvent | ChatEvent) -> bytes:
    """One event as a JSON line (without the newline).

    A string that is not valid Unicode (a lone surrogate, as in tool arguments decoded
    from the JSON ``"\\ud800"``) is written with U+FFFD in its place, never raised on:
    see ``ollm.types.text.valid_unicode``.
    """
    return encode_json(event, _encoder.encode)


def decode_chat_event(data: bytes | str) -> ChatEvent:
    """Decode one JSON line of a chat's event stream."""
    event: ChatEvent = _chat_decoder.decode(data)
    return event


def decode_provider_event(data: bytes | str) -> ProviderEvent:
    """Decode one JSON line of a provider's event stream."""
    event: ProviderEvent = _provider_decoder.decode(data)
    return event
