"""Run one turn's tool calls concurrently, each under its timeout.

Internal: not part of ollm's public API (a step of ``ollm.ChatClient.chat``); its layout
may change in any release.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import anyio
import msgspec

from ollm.errors import ErrorCode, OllmError, ToolArgumentsError
from ollm.registries.tools import unknown_tool_message
from ollm.tools.result import ToolResult
from ollm.tools.tool import Tool, ToolContext, render_result
from ollm.types.abort import AbortSignal
from ollm.types.messages import ImagePart, ToolCall

__all__ = [
    "ToolOutcome",
    "cancelled_outcome",
    "describe_exception",
    "invoke",
    "refused_outcome",
    "run_tool_calls",
    "without_images",
]


class ToolOutcome(msgspec.Struct, frozen=True):
    """What a call produced: the text (and images) the model reads, and whether it is an error."""

    call: ToolCall
    content: str
    is_error: bool = False
    error_code: str | None = None
    duration_ms: float = 0.0
    images: tuple[ImagePart, ...] = ()


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
    preset: Mapping[str, ToolOutcome],
) -> list[ToolOutcome]:
    """Run ``calls`` at once (sync tools in worker threads); results in call order.

    ``preset`` gives the outcome of calls that must not run. If ``abort`` fires, the
    running tools are cancelled and their results say so.
    """
    outcomes: list[ToolOutcome | None] = [preset.get(call.id) for call in calls]
    pending = [i for i, outcome in enumerate(outcomes) if outcome is None]

    async def run_one(index: int) -> None:
        outcomes[index] = await invoke(calls[index], tools, timeout, abort)

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


async def invoke(
    call: ToolCall, tools: Mapping[str, Tool], timeout: float | None, abort: AbortSignal
) -> ToolOutcome:
    """Run one call under its timeout (the tool's own, else ``timeout``); its outcome."""
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
    except OllmError as exc:
        # A toolset's own error (a server that stopped...) keeps its code and advice.
        return ToolOutcome(
            call, f"Tool {call.name!r} failed: {exc.message}", True, exc.code, _ms(started)
        )
    except (Exception, SystemExit) as exc:
        return _failed(call, exc, started)
    if scope.cancelled_caught:
        return ToolOutcome(
            call,
            f"Tool {call.name!r} did not finish within {limit:g} seconds.",
            True,
            ErrorCode.TOOL_TIMEOUT,
            _ms(started),
        )
    if isinstance(value, ToolResult):
        code = ErrorCode.TOOL_FAILED if value.is_error else None
        return ToolOutcome(
            call, value.text, value.is_error, code, _ms(started), images=value.images
        )
    try:
        text = render_result(value)
    except Exception as exc:  # a result that cannot be written: the tool's bug, told
        return _failed(call, exc, started)
    return ToolOutcome(call, text, False, None, _ms(started))


def _failed(call: ToolCall, exc: BaseException, started: float) -> ToolOutcome:
    """The outcome of a tool that raised (or returned what cannot be written)."""
    return ToolOutcome(
        call,
        f"Tool {call.name!r} failed: {describe_exception(exc)}",
        True,
        ErrorCode.TOOL_FAILED,
        _ms(started),
    )


def without_images(outcomes: Sequence[ToolOutcome], model: str) -> list[ToolOutcome]:
    """The outcomes for a model that cannot see images: each image becomes a short note."""
    changed: list[ToolOutcome] = []
    for outcome in outcomes:
        if not outcome.images:
            changed.append(outcome)
            continue
        notes = [
            f"[{image.mime_type} image of {len(image.data)} bytes, left out: "
            f"{model} cannot see images]"
            for image in outcome.images
        ]
        text = "\n".join(([outcome.content] if outcome.content else []) + notes)
        changed.append(msgspec.structs.replace(outcome, content=text, images=()))
    return changed


def describe_exception(exc: BaseException) -> str:
    """``Type: message``; for an exception group (a tool's own task group), its leaves."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_exception(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
