"""The decisions of a turn, as pure functions of what the turn produced.

Each is a value in, a value out: which calls are refused before any tool runs, and
whether the chat ends after the turn (and why). The chat loop (``ChatRun``) applies them;
tests can call them alone.

Internal: not part of ollm's public API (a step of ``ollm.ChatClient.chat``); its layout
may change in any release.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple

from ollm.errors import ErrorCode
from ollm.runtime.tool_runner import ToolOutcome, refused_outcome
from ollm.types.depth import MAX_JSON_DEPTH
from ollm.types.events import ErrorEvent, FinishReason
from ollm.types.messages import ToolCall
from ollm.types.strategy import ReplyReview

__all__ = ["Limits", "TurnEnd", "refusals", "turn_end"]


class Limits(NamedTuple):
    """A chat's bounds: requests, tool calls, and the tool calls used so far."""

    max_turns: int
    max_tool_calls: int
    used: int


def refusals(
    calls: Sequence[ToolCall],
    *,
    too_deep: Collection[str],
    review: ReplyReview | None,
    wrap_up: bool,
    limits: Limits,
) -> tuple[dict[str, ToolOutcome], int]:
    """The calls that must not run (id to the result the model reads), and the tool
    calls the chat has used once the others run.

    A call is refused when its arguments are not a JSON object or nest too deeply, when
    the strategy's review answers it or rejects the reply, at the turn limit, and past
    the chat's limit of tool calls (only calls that run count towards it).
    """
    refused: dict[str, ToolOutcome] = {}
    for call in calls:
        if call.invalid_args is not None:
            refused[call.id] = refused_outcome(
                call,
                "its arguments are not a JSON object (or are nested too deeply): "
                f"{_clip(call.invalid_args)}. Call it again with the arguments as one "
                "flat JSON object.",
                ErrorCode.INVALID_ARGUMENTS,
            )
        elif call.id in too_deep:
            refused[call.id] = refused_outcome(
                call,
                f"its arguments were nested more than {MAX_JSON_DEPTH} levels deep. Send "
                "a flatter JSON object.",
                ErrorCode.INVALID_ARGUMENTS,
            )
    if review is not None:
        for call in calls:
            if call.id in review.results:
                refused[call.id] = refused_outcome(
                    call, review.results[call.id], ErrorCode.TOOL_FAILED
                )
        if review.error is not None or review.feedback is not None:
            why = "the reply was not in the expected format."
            for call in calls:
                refused[call.id] = refused_outcome(call, why, ErrorCode.FORMAT_ERROR)
    if wrap_up:
        for call in calls:
            refused[call.id] = refused_outcome(
                call,
                f"the chat reached its limit of {limits.max_turns} turns.",
                ErrorCode.TOOL_LIMIT,
            )
    used = limits.used
    for call in calls:
        if call.id in refused:
            continue
        if used >= limits.max_tool_calls:
            refused[call.id] = refused_outcome(
                call,
                f"this chat reached its limit of {limits.max_tool_calls} tool calls. "
                "Answer with what you have.",
                ErrorCode.TOOL_LIMIT,
            )
        else:
            used += 1
    return refused, used


class TurnEnd(NamedTuple):
    """What follows a turn whose calls have their results.

    ``error`` is emitted first, then a ``TurnCompleteEvent`` when ``complete``;
    ``feedback`` goes into the history as a user message (a correction the strategy
    asks for); ``finish`` ends the chat with that reason, or ``None`` goes on.
    """

    error: ErrorEvent | None
    complete: bool
    feedback: str | None
    finish: FinishReason | None


def turn_end(
    *,
    aborted: bool,
    review: ReplyReview | None,
    wrap_up: bool,
    calls: int,
    reason: FinishReason,
) -> TurnEnd:
    """Whether the chat ends after a turn with ``calls`` calls whose reply ended for
    ``reason``, and how."""
    if aborted:
        return TurnEnd(None, False, None, "cancelled")
    if review is not None and review.error is not None:
        return TurnEnd(review.error, False, None, "error")
    feedback = review.feedback if review is not None else None
    if wrap_up:
        return TurnEnd(None, True, feedback, "max_turns")
    if feedback is not None or calls:
        return TurnEnd(None, True, feedback, None)
    return TurnEnd(None, True, None, reason)


def _clip(text: str, limit: int = 200) -> str:
    """``text`` quoted, cut to ``limit`` characters for a message."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
