"""A plugin for tests: the tool ``lookup`` and the middleware ``recorder``, which writes
each of its calls as a JSON line to the file ``$RECORD_TO`` (or the one it is given).

The same module serves a chat in the test's process and ``ollm chat`` in a child
process (through the entry point ``recorder``), so both record with the same code.
"""

from __future__ import annotations

import json
import os
from typing import Any

import ollm


def lookup(city: str) -> str:
    """Look up the weather of a city.

    Args:
        city: The city.
    """
    return f"{city}: sunny"


class Recorder:
    """Notes every call it gets, some methods async and some plain (in a thread)."""

    name = "recorder"

    def __init__(self, path: str) -> None:
        self.path = path

    def _note(self, *what: Any) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(what) + "\n")

    async def on_request(self, ctx: ollm.MiddlewareContext, request: ollm.ProviderRequest) -> Any:
        roles = [m.role for m in request.messages]
        self._note("request", ctx.turn, roles, [t.name for t in request.tools])
        return request

    def on_event(self, ctx: ollm.MiddlewareContext, event: ollm.ChatEvent) -> Any:
        detail: Any = None
        if isinstance(event, (ollm.TextEvent, ollm.ThinkingEvent)):
            detail = event.text
        elif isinstance(event, (ollm.ToolCallStartEvent, ollm.ToolCallResultEvent)):
            detail = [event.call.name, event.call.args]
        elif isinstance(event, ollm.FinishEvent):
            detail = event.reason
        self._note("event", event.type, detail)
        return event

    async def before_tool_call(self, ctx: ollm.MiddlewareContext, call: ollm.ToolCall) -> Any:
        self._note("before", call.name, call.args)
        return call

    def after_tool_call(
        self, ctx: ollm.MiddlewareContext, call: ollm.ToolCall, result: ollm.ToolResult
    ) -> Any:
        self._note("after", call.name, result.text)
        return result

    async def on_message(self, ctx: ollm.MiddlewareContext, message: ollm.Message) -> Any:
        self._note("message", message.role, message.text)
        return message

    def on_finish(self, ctx: ollm.MiddlewareContext, finish: ollm.FinishEvent) -> None:
        self._note("finish", finish.reason)


@ollm.hookimpl
def ollm_tools() -> list[Any]:
    return [lookup]


@ollm.hookimpl
def ollm_middleware() -> list[ollm.MiddlewareSpec]:
    return [
        ollm.MiddlewareSpec(
            "recorder", lambda: Recorder(os.environ["RECORD_TO"]), "notes every call"
        )
    ]
