"""ollm's messages and tools as Ollama's JSON objects, for code that speaks the API itself.

The provider uses the same conversion for every request, so what these functions
return is exactly what goes on the wire (images as raw base64, tool-call arguments as
objects, ``tool_name`` and ``tool_call_id`` on tool results).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ollm.errors import BadResponseError
from ollm.types import Message, ToolSchema
from ollm_ollama._convert import message_from_wire, message_to_wire, tool_from_wire, tool_to_wire
from ollm_ollama._wire import WireMessage, WireTool

__all__ = ["message_from_ollama", "message_to_ollama", "tool_from_ollama", "tool_to_ollama"]


def message_to_ollama(message: Message) -> dict[str, Any]:
    """``message`` as an entry of Ollama's ``messages[]``."""
    data: dict[str, Any] = msgspec.to_builtins(message_to_wire(message))
    return data


def message_from_ollama(data: Mapping[str, Any]) -> Message:
    """An entry of Ollama's ``messages[]`` as an ollm ``Message``.

    Raises ``BadResponseError`` naming the field that is wrong.
    """
    try:
        wire = msgspec.convert({"content": "", **data}, WireMessage)
    except msgspec.ValidationError as exc:
        raise BadResponseError(f"Not a valid Ollama message: {exc}.") from None
    return message_from_wire(wire)


def tool_to_ollama(tool: ToolSchema) -> dict[str, Any]:
    """``tool`` as an entry of Ollama's ``tools[]``."""
    data: dict[str, Any] = msgspec.to_builtins(tool_to_wire(tool))
    return data


def tool_from_ollama(data: Mapping[str, Any]) -> ToolSchema:
    """An entry of Ollama's ``tools[]`` as an ollm ``ToolSchema``."""
    try:
        wire = msgspec.convert(dict(data), WireTool)
    except msgspec.ValidationError as exc:
        raise BadResponseError(f"Not a valid Ollama tool: {exc}.") from None
    return tool_from_wire(wire)
