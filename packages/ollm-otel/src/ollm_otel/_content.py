"""Messages in the JSON shapes of the GenAI conventions, each attribute capped.

``gen_ai.input.messages`` and ``gen_ai.output.messages`` are lists of ``{"role",
"parts"}`` (a part is ``text``, ``tool_call``, ``tool_call_response`` or ``blob``),
``gen_ai.system_instructions`` a list of parts. Images are described (their type and
size), never copied. An attribute longer than its cap keeps its newest messages, and a
text longer than the cap is cut, so that what is exported is still valid JSON.

Internal: used by ``ollm_otel.Otel``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ollm.types import ImagePart, Message, TextPart, ToolCall, encode_json

__all__ = ["CUT", "capped", "capped_text", "capped_value", "message_json", "system_json"]

CUT = "…[cut]"
"""What ends a text cut to fit its attribute's cap."""


def capped_text(text: str, limit: int) -> str:
    """``text``, cut to at most ``limit`` characters (``CUT`` marking the cut)."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(CUT))] + CUT


def _part(part: object) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "content": part.text}
    if isinstance(part, ImagePart):
        return {"type": "blob", "modality": "image", "mime_type": part.mime_type,
                "size": len(part.data)}  # fmt: skip
    return {"type": type(part).__name__}


def _empty(part: object) -> bool:
    return isinstance(part, TextPart) and not part.text


def _call(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.args}


def message_json(message: Message, finish_reason: str | None = None) -> dict[str, Any]:
    """One message as the conventions shape it (``finish_reason`` for an output one)."""
    if message.role == "tool":
        parts: list[dict[str, Any]] = [
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.text}
        ]
    else:
        parts = [_part(part) for part in message.parts if not _empty(part)]
        parts += [_call(call) for call in message.tool_calls]
    shaped: dict[str, Any] = {"role": message.role, "parts": parts}
    if finish_reason is not None:
        shaped["finish_reason"] = finish_reason
    return shaped


def system_json(prompt: str) -> list[dict[str, Any]]:
    """The system prompt as ``gen_ai.system_instructions``."""
    return [{"type": "text", "content": prompt}]


def capped(items: Sequence[Any], limit: int) -> str:
    """``items`` as JSON of at most ``limit`` characters: the oldest items left out
    first, then the texts of those left cut."""
    kept = list(items)
    text = encode_json(kept).decode()
    while len(text) > limit and len(kept) > 1:
        kept.pop(0)
        text = encode_json(kept).decode()
    share = limit
    while len(text) > limit and share > 0:
        share //= 2
        kept = [_cut_texts(item, share) for item in kept]
        text = encode_json(kept).decode()
    return text if len(text) <= limit else "[]"


def capped_value(value: Any, limit: int) -> str:
    """``value`` as JSON of at most ``limit`` characters (its texts cut to fit)."""
    return capped([value], limit + 2)[1:-1] or "null"


def _cut_texts(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return capped_text(value, limit)
    if isinstance(value, dict):
        return {k: _cut_texts(v, limit) for k, v in value.items()}
    if isinstance(value, Iterable):
        return [_cut_texts(v, limit) for v in value]
    return value
