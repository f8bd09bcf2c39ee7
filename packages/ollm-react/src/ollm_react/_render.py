"""Render ollm's canonical history as the ReAct text conversation a model reads.

The conversation keeps tool calls and tool messages (so it can go on with any
strategy); a model without native tools reads them as text instead:

- an assistant message with tool calls becomes ``Thought / Action / Action Input``,
  with the input as ``json.dumps`` of the arguments (never the raw text the model
  wrote, with its fences and invented tail);
- a final answer becomes ``Thought / Final Answer``;
- each tool message becomes its own user turn, ``Observation: <JSON>``: a result that
  is JSON stays JSON, text becomes a JSON string, an error becomes ``{"error": ...}``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from ollm.types import Message
from ollm_react._markers import MARKERS

__all__ = [
    "dump_arguments",
    "render_action",
    "render_answer",
    "render_messages",
    "render_observation",
    "result_json",
]


def render_observation(content: str, *, is_error: bool = False) -> str:
    """A tool result as the model reads it: ``Observation: <JSON>``."""
    if is_error:
        return "Observation: " + json.dumps({"error": content}, ensure_ascii=False)
    return "Observation: " + result_json(content)


def result_json(content: str) -> str:
    """A tool result as JSON: JSON stays JSON (re-encoded), text becomes a JSON string."""
    stripped = content.strip(" \t\r\n")  # JSON's whitespace, no other
    if stripped and stripped[0] in '{["-0123456789tfn':
        try:
            value = _DECODER.decode(stripped)
        except (ValueError, RecursionError):
            pass
        else:
            try:
                return json.dumps(value, ensure_ascii=False)
            except (ValueError, RecursionError):
                pass
    return json.dumps(content, ensure_ascii=False)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("not a finite number")
    return value


def _reject(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject, parse_float=_finite)


def dump_arguments(args: dict[str, Any]) -> str:
    """Arguments as the history shows them."""
    return json.dumps(args, ensure_ascii=False, default=str)


def render_action(message: Message) -> str:
    """An assistant message that calls tools, as ReAct text."""
    thought = (message.thinking or message.text).strip()
    lines = [f"Thought: {thought}"] if thought else []
    for call in message.tool_calls:
        lines.append(f"Action: {call.name}")
        lines.append(f"Action Input: {dump_arguments(call.args)}")
    return "\n".join(lines)


def render_answer(message: Message) -> str:
    """An assistant message without calls, as ReAct text.

    A reply kept as the model wrote it (a malformed one, which carries its markers,
    or one cut short) is shown as it was; a plain answer gets its Final Answer marker.
    """
    text = message.text
    if message.incomplete or not text.strip() or MARKERS.search(text):
        return text
    thought = (message.thinking or "").strip()
    head = f"Thought: {thought}\n" if thought else ""
    return f"{head}Final Answer: {text.strip()}"


def render_messages(messages: Sequence[Message]) -> tuple[Message, ...]:
    """The whole history as a ReAct text conversation (images stay on their turns)."""
    rendered: list[Message] = []
    for message in messages:
        if message.role == "tool":
            rendered.append(
                Message.user(render_observation(message.text, is_error=message.is_error))
            )
        elif message.role == "assistant":
            text = render_action(message) if message.tool_calls else render_answer(message)
            rendered.append(Message.assistant(text, incomplete=message.incomplete))
        else:
            rendered.append(message)
    return tuple(rendered)
