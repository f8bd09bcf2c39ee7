"""Token counters for models whose provider cannot count, and the fallback estimate."""

from __future__ import annotations

import builtins
import fnmatch
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from ollm.types.messages import Message, TextPart
from ollm.types.request import ProviderRequest, ToolSchema
from ollm.types.specs import TokenCounter, TokenCounterSpec
from ollm.types.text import encode_json

__all__ = [
    "TokenCounterRegistry",
    "UsageAnchors",
    "estimate_text_tokens",
    "fallback_count",
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
