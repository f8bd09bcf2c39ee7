"""Internal: the calls a text-protocol chat made, by tool and arguments, and their results,
so a call repeated with the same arguments can be answered from the first one's result."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ollm.types import Message, ToolCall
from ollm_react._render import result_json

__all__ = ["CallMemory"]


class CallMemory:
    """One chat's calls: how often each (tool, arguments) was made, and its last result."""

    def __init__(self) -> None:
        self._made: dict[str, int] = {}
        self._keys: dict[str, str] = {}  # call id -> its key
        self._results: dict[str, str] = {}

    @staticmethod
    def key(call: ToolCall) -> str:
        arguments = json.dumps(call.args, sort_keys=True, ensure_ascii=False, default=str)
        return f"{call.name}\x00{arguments}"

    def learn(self, messages: Sequence[Message]) -> None:
        """The results the history holds of calls this memory has seen made."""
        for message in messages:
            if message.role == "tool" and message.tool_call_id in self._keys:
                self._results[self._keys[message.tool_call_id]] = message.text

    def made(self, call: ToolCall) -> int:
        """How often a call of the same tool with the same arguments was made before."""
        return self._made.get(self.key(call), 0)

    def shown(self, call: ToolCall) -> str:
        """The result the same call got last (when the history showed it), as the model
        reads a result."""
        earlier = self._results.get(self.key(call))
        return result_json(earlier) if earlier is not None else "not known"

    def record(self, call: ToolCall) -> None:
        """``call`` is made (it runs)."""
        key = self.key(call)
        self._made[key] = self._made.get(key, 0) + 1
        self._keys[call.id] = key
