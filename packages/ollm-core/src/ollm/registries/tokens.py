"""Token counters for models whose provider cannot count, and the fallback estimate."""

from __future__ import annotations

import builtins
import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec

from ollm.types.messages import Message, TextPart
from ollm.types.request import ProviderRequest, ToolSchema
from ollm.types.specs import TokenCounter, TokenCounterSpec
from ollm.types.text import encode_json

__all__ = [
    "IncrementalCount",
    "MessageCharacters",
    "TokenCounterRegistry",
    "UsageAnchors",
    "estimate_text_tokens",
    "fallback_count",
    "message_characters",
    "request_text",
]


class TokenCounterRegistry:
    """Counters by model-name pattern: an exact name wins, then the first matching glob."""

    def __init__(self) -> None:
        self._specs: builtins.list[TokenCounterSpec] = []

    def register(
        self, pattern: str | TokenCounterSpec, counter: TokenCounter | None = None
    ) -> None:
        """Register ``counter`` for models matching ``pattern`` (``"llama3*"``)."""
        if isinstance(pattern, TokenCounterSpec):
            spec = pattern
        else:
            if counter is None:
                raise TypeError("register(pattern, counter) needs a counter")
            spec = TokenCounterSpec(pattern=pattern, counter=counter)
        if not callable(spec.counter):
            raise TypeError(f"the token counter for {spec.pattern!r} is not callable")
        self._specs.append(spec)

    def get(self, model: str) -> TokenCounter | None:
        """The counter for ``model``, or ``None``."""
        for spec in self._specs:
            if spec.pattern == model:
                return spec.counter
        for spec in self._specs:
            if fnmatch.fnmatchcase(model, spec.pattern):
                return spec.counter
        return None

    def list(self) -> builtins.list[str]:
        """The registered patterns."""
        return [spec.pattern for spec in self._specs]

    def __len__(self) -> int:
        return len(self._specs)


def estimate_text_tokens(text: str) -> int:
    """The fallback estimate of one text: ceil(characters / 4)."""
    return -(-len(text) // 4)


_schema_encoder = msgspec.json.Encoder()


def request_text(request: ProviderRequest) -> str:
    """Everything in a request that takes up context, as text."""
    pieces: list[str] = []
    if request.system_prompt:
        pieces.append(request.system_prompt)
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                pieces.append(part.text)
        if message.thinking:
            pieces.append(message.thinking)
        for call in message.tool_calls:
            pieces.append(call.name)
            pieces.append(encode_json(call.args, _schema_encoder.encode).decode())
    for tool in request.tools:
        pieces.append(_schema_encoder.encode(tool).decode())
    return "".join(pieces)


def fallback_count(request: ProviderRequest) -> int:
    """ceil(characters / 4) over the request, and at least 1."""
    return max(1, estimate_text_tokens(request_text(request)))


def message_characters(message: Message) -> int:
    """The characters of one message that ``request_text`` counts."""
    characters = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            characters += len(part.text)
    if message.thinking:
        characters += len(message.thinking)
    for call in message.tool_calls:
        characters += len(call.name) + len(encode_json(call.args, _schema_encoder.encode).decode())
    return characters


class MessageCharacters:
    """The characters of a growing list of messages (a conversation), counted once each.

    ``update`` counts only the messages added since the last call; a list that changed
    otherwise (not the same objects) is counted again from the start."""

    __slots__ = ("counts", "last", "total")

    def __init__(self) -> None:
        self.counts: builtins.list[int] = []
        self.total = 0
        self.last: Message | None = None

    def update(self, messages: Sequence[Message]) -> bool:
        """Count what was added; ``True`` when the list had changed and was counted
        again from the start."""
        known = len(self.counts)
        changed = bool(known) and (len(messages) < known or messages[known - 1] is not self.last)
        if changed:
            self.counts.clear()
            self.total = known = 0
        for message in messages[known:]:
            count = message_characters(message)
            self.counts.append(count)
            self.total += count
        self.last = messages[-1] if messages else None
        return changed


class IncrementalCount:
    """``fallback_count`` of a chat's successive requests, at the cost of what each adds:
    the messages are counted once, the system prompt and tools once while unchanged."""

    __slots__ = ("_fixed", "_fixed_of", "messages")

    def __init__(self) -> None:
        self.messages = MessageCharacters()
        self._fixed_of: tuple[object, object] | None = None
        self._fixed = 0

    def fixed(self, request: ProviderRequest) -> int:
        """The characters of the system prompt and the tools."""
        key = (request.system_prompt, request.tools)
        if (
            self._fixed_of is None
            or key[0] is not self._fixed_of[0]
            or key[1] is not self._fixed_of[1]
        ):
            bare = ProviderRequest(request.model, (), request.system_prompt, request.tools)
            self._fixed, self._fixed_of = len(request_text(bare)), key
        return self._fixed

    def __call__(self, request: ProviderRequest) -> int:
        """The same number as ``fallback_count(request)``."""
        self.messages.update(request.messages)
        return max(1, -(-(self.fixed(request) + self.messages.total) // 4))


@dataclass(frozen=True)
class _Anchor:
    """What the server counted for the last request it answered for one model."""

    messages: tuple[Message, ...]
    system_prompt: str | None
    tools: tuple[ToolSchema, ...]
    prompt_tokens: int


class UsageAnchors:
    """Prompt-token estimates anchored on what a provider's server last counted.

    A provider calls ``remember`` with the prompt tokens its server reported for a
    request, and ``count`` for the next one: when the history only grew since (same
    system prompt and tools, earlier messages unchanged), the estimate is the server's
    count plus characters / 4 of the new messages; else characters / 4 of the whole
    request. Exact where it matters most, a long conversation, at no cost.
    """

    def __init__(self) -> None:
        self._anchors: dict[str, _Anchor] = {}

    def remember(self, request: ProviderRequest, prompt_tokens: int | None) -> None:
        """Note the prompt tokens the server counted for ``request`` (ignored if none)."""
        if prompt_tokens:
            self._anchors[request.model] = _Anchor(
                request.messages, request.system_prompt, request.tools, prompt_tokens
            )

    def count(self, request: ProviderRequest) -> int:
        """A positive estimate of the prompt tokens of ``request``."""
        anchor = self._anchors.get(request.model)
        if anchor is not None:
            known = len(anchor.messages)
            messages = request.messages
            if (
                len(messages) >= known
                and anchor.system_prompt == request.system_prompt
                and anchor.tools == request.tools
                and messages[:known] == anchor.messages
            ):
                added = ProviderRequest(model=request.model, messages=messages[known:])
                return max(1, anchor.prompt_tokens + estimate_text_tokens(request_text(added)))
        return fallback_count(request)

    def forget(self, matches: Callable[[str], bool]) -> None:
        """Drop the anchors of the models for which ``matches(name)`` is true."""
        for name in [name for name in self._anchors if matches(name)]:
            del self._anchors[name]
