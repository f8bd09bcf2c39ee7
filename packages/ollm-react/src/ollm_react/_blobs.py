"""Tool calls written as JSON objects: the shapes models write, for ReAct and for recovery.

- LangChain's agents: ``{"action": NAME, "action_input": ARGS}`` (``"Final Answer"`` as
  the action is the answer);
- function shape: ``{"name": NAME, "arguments": ARGS}`` (``"parameters"`` for Llama 3.x,
  ``"args"``, ``"input"``); arguments may be a JSON *string* (OpenAI's own shape);
- ``{"tool": NAME, "tool_input": ARGS}``, and ``{"function": {"name", "arguments"}}``
  (``"type": "function"`` around it).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["FINAL", "call_in", "is_final_name"]

_NAME_KEYS = ("name", "action", "tool", "tool_name", "function", "function_name")
_ARG_KEYS = (
    "arguments",
    "parameters",
    "action_input",
    "args",
    "input",
    "tool_input",
    "params",
    "kwargs",
)
# Keys a call object may carry besides its name and arguments.
_OTHER_KEYS = frozenset({"type", "id", "call_id", "thought", "reasoning"})
FINAL = "Final Answer"


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def is_final_name(name: str) -> bool:
    """Whether a call's name means "this is my answer" (``Final Answer``, ``final_answer``)."""
    folded = "".join(c for c in name.lower() if c.isalnum())
    return folded in ("finalanswer", "answer")


def call_in(value: Any, *, strict: bool = False) -> tuple[str, Any] | None:
    """``(name, arguments)`` of a call object, or ``None`` when it is not one.

    Arguments are ``MISSING`` when the object has none; a JSON string holding an object
    is decoded. ``strict`` accepts only objects with no other keys than a call's (for
    text that might be a JSON answer rather than a call).
    """
    if not isinstance(value, dict):
        return None
    inner = value.get("function")
    if isinstance(inner, dict):
        if strict and set(value) - {"function"} - _OTHER_KEYS:
            return None
        value = inner
    name_key = next((k for k in _NAME_KEYS if isinstance(value.get(k), str)), None)
    if name_key is None:
        return None
    name = value[name_key].strip()
    if not name:
        return None
    arg_key = next((k for k in _ARG_KEYS if k in value), None)
    if strict:
        allowed = {name_key, *([arg_key] if arg_key else []), *_OTHER_KEYS}
        if set(value) - allowed:
            return None
    args = value[arg_key] if arg_key is not None else MISSING
    if isinstance(args, str) and args.strip().startswith("{"):
        try:
            decoded = json.loads(args)
        except (ValueError, RecursionError):
            decoded = None
        if isinstance(decoded, dict):
            args = decoded
    return name, args
