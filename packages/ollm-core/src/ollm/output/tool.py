"""The built-in output strategy ``tool``: the value as the arguments of a forced tool call,
for models whose tool calling is stronger than their JSON mode (pydantic-ai's
``ToolOutput``).

``prepare`` offers one more tool, ``final_result`` (``final_result_1``... when a tool of
the chat has that name), whose parameters are the output's schema, and forces it
(``tool_choice``: its name when the chat offers no other tool, ``required`` when it does,
so the other tools still run first; not while the model thinks, which Anthropic's API
refuses: the system prompt asks then). A schema whose root is not an object is wrapped as
``{"value": ...}`` (a tool's arguments are an object). ``stream`` turns the call back
into text: the runtime sees the value as the reply's text, and everything downstream
(partial values, validation, corrections, the history) works as for ``native``; the
history never holds that call, so never a call without a result.

``output_tool_parameters`` and ``output_tool_text`` are the wrapping and its undoing,
shared with providers that give typed output through a tool of their own
(``ollm-anthropic``), through ``ollm.kit``.

Internal: not part of ollm's public API (``ollm.kit`` has the two helpers); its layout
may change in any release.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec

from ollm.output.native import extract_json, with_system
from ollm.output.schema import OutputMismatch
from ollm.types.events import ProviderEvent, TextEvent, ToolCallDeltaEvent, ToolCallEvent
from ollm.types.messages import ToolCall
from ollm.types.request import ProviderRequest, ToolSchema
from ollm.types.text import encode_json

__all__ = ["OUTPUT_TOOL", "ToolOutput", "output_tool_parameters", "output_tool_text"]

OUTPUT_TOOL = "final_result"
_DESCRIPTION = (
    "The final answer: call this tool once, with the whole answer as its arguments; "
    "they are the answer the user gets."
)
# The keys a JSON Schema's references are resolved against: they stay at the root.
_DEFINITIONS = ("$defs", "definitions")


def output_tool_parameters(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``schema`` as a tool's parameters, and whether it was wrapped: an object schema
    as it is; any other as ``{"value": schema}`` (a tool's arguments are an object), its
    ``$defs`` lifted to the wrapper's root, where its references point."""
    if schema.get("type") == "object":
        return schema, False
    inner = {k: v for k, v in schema.items() if k not in _DEFINITIONS}
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"value": inner},
        "required": ["value"],
    }
    wrapped.update({k: schema[k] for k in _DEFINITIONS if k in schema})
    return wrapped, True


def output_tool_text(call: ToolCall, wrapped: bool) -> str:
    """The JSON text of the value a call of the output tool carries: its arguments (the
    ``value`` in them when ``wrapped``), or the text it gave that is not a JSON object,
    as it is (so that the correction names what was wrong)."""
    if call.invalid_args is not None:
        return call.invalid_args
    value: Any = call.args.get("value", call.args) if wrapped else call.args
    return encode_json(value).decode()


class ToolOutput:
    """Typed output as the arguments of a forced call of ``final_result``.

    ``uses_tools``: it needs native tool calling (the runtime asks a model without it as
    ``auto`` asks, and says so). ``answer_again`` is how a correction asks for
    the value again. One object per chat: it remembers the tool's name and whether the
    schema was wrapped from ``prepare`` to ``stream`` and ``extract``.
    """

    name = "tool"
    constrains = True
    uses_tools = True

    def __init__(self) -> None:
        self.tool = OUTPUT_TOOL
        self.wrapped = False
        self._caller_deltas = False  # whether the chat asked for tool call deltas
        self._value: str | None = None  # the value the last stream's call gave

    @property
    def answer_again(self) -> str:
        """How a correction asks for the value again."""
        return f"Call {self.tool} again with the corrected value as its arguments."

    def prepare(self, request: ProviderRequest, schema: dict[str, Any]) -> ProviderRequest:
        """``request`` with the output tool offered and forced, and a line saying so."""
        taken = {tool.name for tool in request.tools}
        name, number = OUTPUT_TOOL, 0
        while name in taken:
            number += 1
            name = f"{OUTPUT_TOOL}_{number}"
        self.tool = name
        parameters, self.wrapped = output_tool_parameters(schema)
        choice = request.tool_choice
        # A thinking model is asked, not forced: the Messages API refuses the pair.
        forces = request.think in (None, False)
        if forces and not request.tools:
            choice = name
        elif forces and choice == "auto":
            choice = "required"  # the chat's tools may run first; a call either way
        self._caller_deltas = request.tool_call_deltas
        request = msgspec.structs.replace(
            request,
            tools=(*request.tools, ToolSchema(name, _DESCRIPTION, parameters)),
            tool_choice=choice,
            response_format=None,
            # An unwrapped value streams as its arguments are written (partial values).
            tool_call_deltas=self._caller_deltas or not self.wrapped,
        )
        return with_system(
            request,
            f"Give your final answer by calling the {name} tool: its arguments are the "
            "whole answer.",
        )

    async def stream(self, events: AsyncIterator[ProviderEvent]) -> AsyncIterator[ProviderEvent]:
        """``events`` with the output tool's call turned into text (its first call; a
        second is dropped), its deltas streamed as text when unwrapped, and other calls'
        deltas only to a chat that asked for them."""
        tool, wrapped, deltas = self.tool, self.wrapped, self._caller_deltas
        self._value = None  # this turn's, not an earlier one's
        index: int | None = None  # the output call's deltas
        dropped: set[int] = set()  # a second output call's
        shown = False  # whether its arguments streamed as text
        try:
            async for event in events:
                kind = type(event)
                if kind is ToolCallDeltaEvent:
                    assert isinstance(event, ToolCallDeltaEvent)
                    if event.name == tool:
                        if index is None:
                            index = event.index
                        elif event.index != index:
                            dropped.add(event.index)
                    if event.index == index:
                        if not wrapped and event.arguments_delta:
                            shown = True
                            yield TextEvent(event.arguments_delta)
                    elif deltas and event.index not in dropped:
                        yield event
                elif kind is ToolCallEvent:
                    assert isinstance(event, ToolCallEvent)
                    call = event.call
                    if call.name != tool:
                        yield event
                    elif self._value is None:
                        self._value = output_tool_text(call, wrapped)
                        if not shown:
                            yield TextEvent(self._value)
                else:
                    yield event
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()

    def extract(self, text: str) -> str:
        """The value the output tool's call gave; without one, the call written as text
        (``{"name": "final_result", "arguments": {...}}``, as a model whose server does
        not parse calls writes it: a local model's template), or the reply when it is the
        JSON value anyway; else ``OutputMismatch`` naming the tool."""
        if self._value is not None:
            return self._value
        found = extract_json(text)
        if found[:1] not in ("{", "[") and not _is_json(found):
            raise OutputMismatch(
                (f"$: the reply did not call {self.tool}: it is prose, not the value",),
                not_json=True,
            )
        written = self._written_call(found)
        return found if written is None else written

    def _written_call(self, found: str) -> str | None:
        """The value of a call of the output tool written as JSON text, or ``None``."""
        if not found.startswith("{"):
            return None
        try:
            value = msgspec.json.decode(found)
        except (msgspec.DecodeError, RecursionError):
            return None
        if not isinstance(value, dict) or value.get("name") != self.tool:
            return None
        args = value.get("arguments", value.get("parameters"))
        if not isinstance(args, dict):
            return None
        return output_tool_text(ToolCall("", self.tool, args), self.wrapped)


def _is_json(text: str) -> bool:
    try:
        msgspec.json.decode(text)
    except msgspec.DecodeError:
        return False
    return True
