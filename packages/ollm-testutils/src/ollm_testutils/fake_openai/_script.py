"""What a test scripts the fake OpenAI-compatible server to answer, and what it recorded."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ollm_testutils.httpserver._scripted import RecordedRequest

__all__ = [
    "AUTO",
    "FLAVORS",
    "Flavor",
    "OpenAIReply",
    "OpenAIToolCall",
    "RecordedRequest",
]


class _Auto:
    def __repr__(self) -> str:
        return "AUTO"


AUTO: Any = _Auto()
"""Let the server decide (a finish reason from the reply, usage when asked for it...)."""

Flavor = Literal["openai", "vllm", "sglang", "llamacpp", "lmstudio", "ollama", "litellm"]
FLAVORS: tuple[Flavor, ...] = (
    "openai",
    "vllm",
    "sglang",
    "llamacpp",
    "lmstudio",
    "ollama",
    "litellm",
)


@dataclass(frozen=True)
class OpenAIToolCall:
    """A tool call in a scripted reply; ``arguments`` may be a raw (even broken) string."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = AUTO

    @property
    def arguments_text(self) -> str:
        """The arguments as the JSON string the wire carries."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), separators=(",", ":"))


ToolCallLike = OpenAIToolCall | tuple[str, Mapping[str, Any]]


@dataclass
class OpenAIReply:
    """One scripted reply to ``/chat/completions``.

    - ``text``: the pieces of the reply's text, one delta each (a string is one piece);
    - ``reasoning``: pieces of reasoning, sent before the text in the flavor's field
      (``reasoning_content`` for vLLM and SGLang, ``reasoning`` for Ollama);
    - ``tool_calls``: calls, framed as the flavor frames them (split into deltas, or
      whole), or as ``tool_call_framing`` says (``"split"``, ``"whole"``,
      ``"interleaved"``: parallel calls' argument pieces alternating);
    - ``finish_reason``: ``AUTO`` gives ``tool_calls`` when there are calls (``stop``
      for LM Studio, as it does), else ``stop``; ``None`` sends none;
    - ``usage``: ``(prompt, completion)``; ``AUTO`` counts characters / 4 and sends it
      when the request asked (``stream_options.include_usage``) or always for llama.cpp;
    - ``end``: ``"done"`` ends with ``data: [DONE]``, ``"no_done"`` without it,
      ``"cut"`` closes the connection after the text (a broken stream);
    - ``delay`` before the head, ``chunk_delay`` between events, ``hang`` after the
      text (until the client leaves);
    - ``status`` and ``error``: an error reply (``OpenAIReply.failure(...)``);
      ``midstream_error``: an ``{"error": ...}`` event after the text;
    - ``raw``: bytes written as the body instead (hostile servers), SSE framing and all.
    """

    text: str | Sequence[str] = ()
    reasoning: str | Sequence[str] = ()
    tool_calls: Sequence[ToolCallLike] = ()
    finish_reason: str | None = AUTO
    usage: tuple[int, int] | None = AUTO
    end: Literal["done", "no_done", "cut"] = "done"
    tool_call_framing: Literal["split", "whole", "interleaved"] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    hang: bool = False
    status: int = 200
    error: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    midstream_error: Mapping[str, Any] | None = None
    raw: Sequence[bytes] | None = None
    refusal: str | None = None

    @property
    def pieces(self) -> list[str]:
        """The text as its pieces."""
        return [self.text] if isinstance(self.text, str) else list(self.text)

    @property
    def reasoning_pieces(self) -> list[str]:
        """The reasoning as its pieces."""
        return [self.reasoning] if isinstance(self.reasoning, str) else list(self.reasoning)

    @property
    def calls(self) -> list[OpenAIToolCall]:
        """The tool calls, normalised."""
        return [
            call if isinstance(call, OpenAIToolCall) else OpenAIToolCall(call[0], call[1])
            for call in self.tool_calls
        ]

    @classmethod
    def failure(
        cls,
        status: int,
        message: str,
        *,
        type: str | None = None,
        code: str | int | None = None,
        param: str | None = None,
        retry_after: float | None = None,
    ) -> OpenAIReply:
        """An error reply in OpenAI's shape (``{"error": {message, type, param, code}}``)."""
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        return cls(
            status=status,
            error={"message": message, "type": type, "param": param, "code": code},
            headers=headers,
        )
