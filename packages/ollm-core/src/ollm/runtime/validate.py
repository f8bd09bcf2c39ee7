"""The check of every request's messages before it is sent, whatever changed them.

A compactor or a middleware may cut or rewrite the history a request carries; servers
answer a tool result without its call (or a call without its result) with a 400 that
says little. The runtime checks the messages first: every tool result follows the
assistant message that made its call (only tool results between them), answers one
call once, and every call of an assistant message is answered before the next message
that is not a tool result. A violation ends the chat ``INVALID_HISTORY``, naming the
message, and nothing is sent.

Internal: not part of ollm's public API; its layout may change in any release.
"""

from __future__ import annotations

from collections.abc import Sequence

from ollm.types.messages import Message

__all__ = ["history_problem"]


def history_problem(messages: Sequence[Message]) -> str | None:
    """What is wrong with ``messages`` as a request's history, or ``None``."""
    waiting: dict[str, str] = {}  # the calls of the last assistant message not answered
    caller: int | None = None  # the index of that message
    for index, message in enumerate(messages):
        role = message.role
        if role == "tool":
            call_id = message.tool_call_id or ""
            if caller is None:
                return (
                    f"message {index + 1} is the result of a call ({message.name}, id "
                    f"{call_id!r}) that no assistant message before it made"
                )
            if call_id not in waiting:
                return (
                    f"message {index + 1} answers the call id {call_id!r} ({message.name}), "
                    f"which message {caller + 1} did not make or which was answered already"
                )
            del waiting[call_id]
            continue
        if waiting:
            return _unanswered(caller, waiting)
        caller = None
        if role == "assistant" and message.tool_calls:
            caller = index
            waiting = {call.id: call.name for call in message.tool_calls}
    if waiting:
        return _unanswered(caller, waiting)
    return None


def _unanswered(caller: int | None, waiting: dict[str, str]) -> str:
    calls = ", ".join(f"{name} (id {call_id!r})" for call_id, name in waiting.items())
    where = f"message {caller + 1}" if caller is not None else "a message"
    return f"the calls {calls} of {where} have no result right after it"
