"""Run one turn's tool calls concurrently, each under its timeout."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import anyio
import msgspec

from ollm.errors import ErrorCode, ToolArgumentsError
from ollm.registries.tools import unknown_tool_message
from ollm.tools.tool import Tool, ToolContext, render_result
from ollm.types.abort import AbortSignal
from ollm.types.messages import ToolCall

__all__ = ["ToolOutcome", "cancelled_outcome", "refused_outcome", "run_tool_calls"]


class ToolOutcome(msgspec.Struct, frozen=True):
    """What a call produced: the text the model reads, and whether it is an error."""

    call: ToolCall
    content: str
    is_error: bool = False
    error_code: str | None = None
    duration_ms: float = 0.0


def cancelled_outcome(call: ToolCall, why: str = "the chat was cancelled") -> ToolOutcome:
    """The result of a call that did not run to its end."""
    return ToolOutcome(
        call, f"Tool {call.name!r} did not run to its end: {why}.", True, ErrorCode.CANCELLED
    )


def refused_outcome(call: ToolCall, why: str, code: str) -> ToolOutcome:
    """The result of a call that was not run at all."""
    return ToolOutcome(call, f"Tool {call.name!r} was not run: {why}", True, code)


async def run_tool_calls(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    *,
    timeout: float | None,
    abort: AbortSignal,
    preset: Mapping[str, ToolOutcome] | None = None,
) -> list[ToolOutcome]:
    """Run ``calls`` at once (sync tools in worker threads); results in call order.

    ``preset`` gives the outcome of calls that must not run. If ``abort`` fires, the
    running tools are cancelled and their results say so.
    """
    outcomes: list[ToolOutcome | None] = [preset.get(call.id) if preset else None for call in calls]
    pending = [i for i, outcome in enumerate(outcomes) if outcome is None]

    async def run_one(index: int) -> None:
        outcomes[index] = await _invoke(calls[index], tools, timeout, abort)

    if pending:
        with abort.guard():
            if len(pending) == 1:
                await run_one(pending[0])
            else:
                async with anyio.create_task_group() as group:
                    for index in pending:
                        group.start_soon(run_one, index)
    return [
        outcome if outcome is not None else cancelled_outcome(calls[i])
        for i, outcome in enumerate(outcomes)
    ]


async def _invoke(
    call: ToolCall, tools: Mapping[str, Tool], timeout: float | None, abort: AbortSignal
) -> ToolOutcome:
    tool = tools.get(call.name)
    if tool is None:
        return ToolOutcome(
            call, unknown_tool_message(call.name, list(tools)), True, ErrorCode.TOOL_NOT_FOUND
        )
    limit = tool.timeout if tool.timeout is not None else timeout
    started = time.perf_counter()
    try:
        with anyio.move_on_after(limit) as scope:
            value = await tool.invoke(call.args, context=ToolContext(call, abort))
    except ToolArgumentsError as exc:
        return ToolOutcome(call, str(exc), True, ErrorCode.INVALID_ARGUMENTS, _ms(started))
    except (Exception, SystemExit) as exc:
        return ToolOutcome(
            call,
            f"Tool {call.name!r} failed: {_describe(exc)}",
            True,
            ErrorCode.TOOL_FAILED,
            _ms(started),
        )
    if scope.cancelled_caught:
        return ToolOutcome(
            call,
            f"Tool {call.name!r} did not finish within {limit:g} seconds.",
            True,
            ErrorCode.TOOL_TIMEOUT,
            _ms(started),
        )
    return ToolOutcome(call, render_result(value), False, None, _ms(started))


def _describe(exc: BaseException) -> str:
    """``Type: message``; for an exception group (a tool's own task group), its leaves."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
