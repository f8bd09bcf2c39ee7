"""Token counters for models whose provider cannot count, and the fallback estimate."""

from __future__ import annotations

import fnmatch

import msgspec

from ollm.types.messages import TextPart
from ollm.types.request import ProviderRequest
from ollm.types.specs import TokenCounter, TokenCounterSpec

__all__ = ["TokenCounterRegistry", "estimate_text_tokens", "fallback_count", "request_text"]


class TokenCounterRegistry:
    """Counters by model-name pattern: an exact name wins, then the first matching glob."""

    def __init__(self) -> None:
        self._specs: list[TokenCounterSpec] = []

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

    def list(self) -> list[str]:
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
            pieces.append(_schema_encoder.encode(call.args).decode())
    for tool in request.tools:
        pieces.append(_schema_encoder.encode(tool).decode())
    return "".join(pieces)


def fallback_count(request: ProviderRequest) -> int:
    """ceil(characters / 4) over the request, and at least 1."""
    return max(1, estimate_text_tokens(request_text(request)))
