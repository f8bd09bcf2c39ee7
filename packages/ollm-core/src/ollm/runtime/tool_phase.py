"""One turn's tool calls through the chat's middleware: rewritten, refused, then run.

Each call that is not refused beforehand goes through the ``before_tool_call`` methods,
outermost first, in the order of the calls. One may change its arguments (the call then
runs with them, and keeps the model's as ``original_args``) or refuse it (``Deny``: its
result is the reason, with ``TOOL_DENIED``). The calls let through run at once,
concurrently, each under its timeout; each result goes back through ``after_tool_call``
of the layers the call went through, innermost first (a refusal too: the layers outside
the one that refused it see it).

Internal: not part of ollm's public API (a step of ``ollm.ChatClient.chat``); its layout
may change in any release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import anyio
import msgspec

from ollm.errors import ErrorCode, MiddlewareError
from ollm.runtime.middleware import ChainAborted, MiddlewareChain
from ollm.runtime.tool_runner import ToolOutcome, cancelled_outcome, invoke, refused_outcome
from ollm.tools.result import ToolResult
from ollm.tools.tool import Tool
from ollm.types.abort import AbortSignal
from ollm.types.messages import ToolCall
from ollm.types.middleware import Ask, Deny

__all__ = ["ToolPhase", "denied_outcome"]


def denied_outcome(call: ToolCall, why: str) -> ToolOutcome:
    """The result of a call refused by a middleware, a rule or a person."""
    return refused_outcome(call, why.strip() or "it was refused", ErrorCode.TOOL_DENIED)


class _Call:
    """One call on its way: as the model asked it, as it will run, and how far it got."""

    __slots__ = ("asked", "call", "depth", "outcome")

    def __init__(self, call: ToolCall, outcome: ToolOutcome | None) -> None:
        self.asked = call
        self.call = call
        self.depth = 0  # the layers whose before_tool_call let it through
        self.outcome = outcome

    def runs_as(self, call: ToolCall) -> None:
        """The call will run as ``call``; the model's arguments are kept if they changed."""
        if call.args != self.asked.args:
            call = msgspec.structs.replace(call, original_args=self.asked.args)
        self.call = call


class ToolPhase:
    """The calls of one turn: ``await phase.run()`` fills ``outcomes`` and ``executed``."""

    __slots__ = ("abort", "calls", "chain", "failure", "timeout", "tools")

    def __init__(
        self,
        chain: MiddlewareChain,
        calls: Sequence[ToolCall],
        refused: Mapping[str, ToolOutcome],
        tools: Mapping[str, Tool],
        *,
        timeout: float | None,
        abort: AbortSignal,
    ) -> None:
        self.chain = chain
        self.tools = tools
        self.timeout = timeout
        self.abort = abort
        self.calls = [_Call(call, refused.get(call.id)) for call in calls]
        self.failure: MiddlewareError | ChainAborted | None = None

    @property
    def outcomes(self) -> list[ToolOutcome]:
        """Every call's outcome, in call order (a call that did not finish says so)."""
        why = "a middleware failed" if self.failure is not None else "the chat was cancelled"
        return [
            item.outcome if item.outcome is not None else cancelled_outcome(item.call, why)
            for item in self.calls
        ]

    @property
    def executed(self) -> tuple[ToolCall, ...]:
        """The calls as they ran: changed arguments keep the model's as ``original_args``."""
        return tuple(item.call for item in self.calls)

    async def run(self) -> None:
        """Decide every call, then run those let through. A middleware that fails (or an
        abort while one runs) is kept in ``failure``: the calls that did not run say so,
        those that ran keep their results, for the history."""
        try:
            ready = await self._decide()
        except (MiddlewareError, ChainAborted) as exc:
            self.failure = exc
            return
        await self._run_all(ready)

    async def _decide(self) -> list[_Call]:
        ready: list[_Call] = []
        for item in self.calls:
            if item.outcome is not None:
                continue
            verdict, item.depth = await self.chain.before(item.call)
            if isinstance(verdict, ToolCall):
                item.runs_as(verdict)
                ready.append(item)
            else:
                why = verdict.message if isinstance(verdict, Deny) else _no_one_to_ask(verdict)
                item.outcome = denied_outcome(item.call, why)
                if item.depth:
                    ready.append(item)  # the layers it went through see the refusal
        return ready

    async def _run_all(self, ready: Sequence[_Call]) -> None:
        if not ready:
            return
        with self.abort.guard():
            if len(ready) == 1:
                await self._run_one(ready[0])
            else:
                async with anyio.create_task_group() as group:
                    for item in ready:
                        group.start_soon(self._run_one, item)

    async def _run_one(self, item: _Call) -> None:
        outcome = item.outcome
        if outcome is None:
            outcome = await invoke(item.call, self.tools, self.timeout, self.abort)
        if item.depth and self.chain.results:
            result = ToolResult(outcome.content, outcome.images, outcome.is_error)
            try:
                changed = await self.chain.after(item.call, result, item.depth)
            except (MiddlewareError, ChainAborted) as exc:
                self.failure = self.failure or exc
                outcome = cancelled_outcome(item.call, "a middleware failed")
            else:
                if changed is not result:
                    outcome = _from_result(outcome, changed)
        item.outcome = outcome


def _from_result(outcome: ToolOutcome, result: ToolResult) -> ToolOutcome:
    """The outcome a middleware's ``after_tool_call`` made of ``outcome``."""
    if result.is_error:
        code = outcome.error_code if outcome.is_error else ErrorCode.TOOL_FAILED
    else:
        code = None
    return msgspec.structs.replace(
        outcome,
        content=result.text,
        images=result.images,
        is_error=result.is_error,
        error_code=code,
    )


def _no_one_to_ask(ask: Ask) -> str:
    reason = f" ({ask.reason})" if ask.reason else ""
    return f"it needs a person's approval{reason}, and no one could be asked."
