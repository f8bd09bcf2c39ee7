"""One turn's tool calls through the chat's middleware: rewritten, refused, asked about,
then run.

Each call that is not refused beforehand goes through the ``before_tool_call`` methods,
outermost first, in the order of the calls. One may change its arguments (the call then
runs with them, and keeps the model's as ``original_args``), refuse it (``Deny``: its
result is the reason, with ``TOOL_DENIED``) or have a person asked (``Ask``). The chat's
approval step, the innermost middleware when the chat has rules or a tool that asks,
answers each call from the policy.

The calls let through start at once, concurrently, each under its timeout. The
questions are put in the order of the calls (an ``ApprovalRequestEvent`` each, before
anything runs) and answered one by one, by the approver or through the stream: an
approved call starts as soon as it is approved (its timeout starts then), while the
next waits for its answer. Each result goes back through ``after_tool_call`` of the
layers the call went through, innermost first (a refusal too).

Internal: not part of ollm's public API (a step of ``ollm.ChatClient.chat``); its layout
may change in any release.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

import anyio
import msgspec

from ollm.errors import ErrorCode, MiddlewareError
from ollm.runtime.approval import ApprovalBoard, ApprovalStep, Approver, Verdict, ask_approver
from ollm.runtime.middleware import MiddlewareChain
from ollm.runtime.tool_runner import ToolOutcome, cancelled_outcome, invoke, refused_outcome
from ollm.tools.result import ToolResult
from ollm.tools.tool import Tool
from ollm.types.abort import AbortSignal
from ollm.types.events import ApprovalRequestEvent, ChatEvent, ToolDecisionEvent
from ollm.types.messages import ToolCall
from ollm.types.middleware import Approve, Ask, Deny

__all__ = ["Asking", "ToolPhase", "denied_outcome"]


def denied_outcome(call: ToolCall, why: str) -> ToolOutcome:
    """The result of a call refused by a middleware, a rule or a person."""
    return refused_outcome(call, why.strip() or "it was refused", ErrorCode.TOOL_DENIED)


class Asking:
    """How a chat's questions are answered: the approver, else the stream when the
    caller can answer it (``answerable``), else no one (the call is refused)."""

    __slots__ = ("answerable", "approver", "before_asking", "board", "step")

    def __init__(
        self,
        board: ApprovalBoard,
        approver: Approver | None,
        *,
        answerable: bool,
        step: ApprovalStep | None,
        before_asking: Callable[[Sequence[ToolCall]], Awaitable[None]],
    ) -> None:
        self.board = board
        self.approver = approver
        self.answerable = answerable
        self.step = step
        # Called once before the first question of a turn: its reply goes into the
        # history then, so a chat stopped while asking can be resumed.
        self.before_asking = before_asking


class _Call:
    """One call on its way: as the model asked it, as it will run, and how far it got."""

    __slots__ = ("asked", "call", "depth", "outcome", "reason", "request", "verdict")

    def __init__(self, call: ToolCall, outcome: ToolOutcome | None) -> None:
        self.asked = call
        self.call = call
        self.depth = 0  # the layers whose before_tool_call let it through
        self.outcome = outcome
        self.reason = ""  # why a person is asked
        self.request: ApprovalRequestEvent | None = None
        self.verdict: tuple[Verdict, str] | None = None  # a person's answer, and by whom

    def runs_as(self, call: ToolCall) -> None:
        """The call will run as ``call``; the model's arguments are kept if they changed."""
        if call.args != self.asked.args:
            call = msgspec.structs.replace(call, original_args=self.asked.args)
        self.call = call


class ToolPhase:
    """The calls of one turn: iterate ``run()`` for its questions and decisions, then
    read ``outcomes``, ``executed`` and ``failure``."""

    __slots__ = ("abort", "asking", "calls", "chain", "failure", "late", "timeout", "tools")

    def __init__(
        self,
        chain: MiddlewareChain,
        calls: Sequence[ToolCall],
        refused: Mapping[str, ToolOutcome],
        tools: Mapping[str, Tool],
        *,
        timeout: float | None,
        abort: AbortSignal,
        asking: Asking | None,
    ) -> None:
        self.chain = chain
        self.tools = tools
        self.timeout = timeout
        self.abort = abort
        self.asking = asking
        self.calls = [_Call(call, refused.get(call.id)) for call in calls]
        self.failure: MiddlewareError | None = None
        self.late: list[ChatEvent] = []  # decisions made while the tools ran

    @property
    def outcomes(self) -> list[ToolOutcome]:
        """Every call's outcome, in call order (a call that did not finish says so)."""
        failed = self.failure is not None and self.failure.code != ErrorCode.CANCELLED
        why = "a middleware failed" if failed else "the chat was cancelled"
        outcomes = []
        for item in self.calls:
            if item.outcome is not None:
                outcomes.append(item.outcome)
            elif item.request is not None and item.verdict is None:
                outcomes.append(
                    refused_outcome(
                        item.call, f"{why} while a person was asked about it.", ErrorCode.CANCELLED
                    )
                )
            else:
                outcomes.append(cancelled_outcome(item.call, why))
        return outcomes

    @property
    def executed(self) -> tuple[ToolCall, ...]:
        """The calls as they ran: changed arguments keep the model's as ``original_args``."""
        return tuple(item.call for item in self.calls)

    async def run(self) -> AsyncIterator[ChatEvent]:
        """Decide every call (yielding the decisions and the questions), then run those
        let through. A middleware that fails (or an abort while one runs) is kept in
        ``failure``: the calls that did not run say so, those that ran keep their
        results, for the history."""
        decided: list[ChatEvent] = []
        try:
            ready, asked = await self._decide(decided)
        except MiddlewareError as exc:
            self.failure = exc
            return
        for event in decided:
            yield event
        if asked:
            try:
                async for event in self._ask(asked):
                    yield event
            except MiddlewareError as exc:
                self.failure = exc
                return
        with self.abort.guard():
            async with anyio.create_task_group() as group:
                for item in ready:
                    group.start_soon(self._run_one, item)
                if asked:
                    await self._answers(asked, group)
        for event in self.late:
            yield event

    # -- deciding --------------------------------------------------------------------

    async def _decide(self, events: list[ChatEvent]) -> tuple[list[_Call], list[_Call]]:
        """Each call through the ``before_tool_call`` methods: those that run, and those
        a person is asked about."""
        ready: list[_Call] = []
        asked: list[_Call] = []
        for item in self.calls:
            if item.outcome is not None:
                continue
            verdict, item.depth = await self.chain.before(item.call)
            if isinstance(verdict, ToolCall):
                item.runs_as(verdict)
                self._note_policy(item, events)
                ready.append(item)
            elif isinstance(verdict, Ask):
                item.reason = verdict.reason
                asked.append(item)
            else:
                self._refuse(item, verdict.message, self._layer_name(item), events)
                if item.depth:
                    ready.append(item)  # the layers it went through see the refusal
        return ready, asked

    def _layer_name(self, item: _Call) -> str:
        """Who refused ``item``: the policy's decider, or the middleware's name. A call
        the policy refused is kept as the policy saw it (rewritten by a middleware, the
        model's arguments as ``original_args``): its decision shows what was refused."""
        layer = self.chain.calls[item.depth]
        step = self.asking.step if self.asking is not None else None
        if step is not None and layer.obj is step:
            seen = step.decided.get(item.call.id)
            if seen is not None:
                item.runs_as(seen)
            decision = step.decisions.get(item.call.id)
            if decision is not None:
                return decision.by
        return layer.name

    def _note_policy(self, item: _Call, events: list[ChatEvent]) -> None:
        """An allow by the approval policy, when it decided the call."""
        step = self.asking.step if self.asking is not None else None
        decision = step.decisions.get(item.call.id) if step is not None else None
        if decision is not None and decision.action == "allow":
            events.append(ToolDecisionEvent(item.call, "allow", decision.by, decision.reason))

    def _refuse(self, item: _Call, why: str, by: str, events: list[ChatEvent]) -> None:
        item.outcome = denied_outcome(item.call, why)
        request_id = item.request.id if item.request is not None else None
        events.append(ToolDecisionEvent(item.call, "deny", by, why, id=request_id))

    # -- asking ----------------------------------------------------------------------

    async def _ask(self, asked: Sequence[_Call]) -> AsyncIterator[ChatEvent]:
        """The questions, in the order of the calls (none for a tool a person approved
        for the chat or the client, nor when no one can answer)."""
        asking = self.asking
        if asking is None:  # an Ask with no approval set up: no one can answer
            for item in asked:
                item.verdict = (Deny(_no_one(item.reason)), "no one")
            return
        await asking.before_asking([item.call for item in self.calls])
        for item in asked:
            remembered = asking.board.remembered(item.call.name)
            if remembered is not None:
                item.verdict = (Approve(remembered), remembered)  # type: ignore[arg-type]
            elif asking.approver is None and not asking.answerable:
                item.verdict = (Deny(_no_one(item.reason)), "no one")
            else:
                item.request = asking.board.ask(item.call, item.reason)
                yield item.request

    async def _answers(self, asked: Sequence[_Call], group: anyio.abc.TaskGroup) -> None:
        """Each question's answer, one by one; an approved call starts at once."""
        for item in asked:
            verdict = item.verdict or await self._answer(item)
            if verdict is None:
                return  # aborted: the calls left did not run
            item.verdict = verdict
            try:
                await self._apply(item, *verdict)
            except MiddlewareError as exc:
                self.failure = exc
                return
            if item.outcome is None or item.depth:
                group.start_soon(self._run_one, item)

    async def _answer(self, item: _Call) -> tuple[Verdict, str] | None:
        asking = self.asking
        assert asking is not None
        assert item.request is not None
        board = asking.board
        if asking.approver is not None and board.pending(item.request.id):
            verdict = await ask_approver(asking.approver, item.request)
            board.answer(item.request.id, verdict, "approver")
        return await board.wait(item.request.id, self.abort)

    async def _apply(self, item: _Call, verdict: Verdict, by: str) -> None:
        """A person's answer: a refusal, or the call goes on through the inner layers
        (a further ``Ask`` is answered by this approval).

        Arguments edited in the answer are decided again, on what will run: the policy's
        step (the innermost layer) sees them even when it was the one that asked; a
        ``deny`` refuses them, and an ``ask`` for another reason than the one answered
        refuses them too (no one approved that), so the model may call again with them.
        """
        request_id = item.request.id if item.request is not None else None
        if isinstance(verdict, Deny):
            self._refuse(item, verdict.message, by, self.late)
            return
        seen = item.call  # what the person was asked about
        edited = verdict.args is not None and dict(verdict.args) != seen.args
        if edited:
            item.runs_as(msgspec.structs.replace(seen, args=dict(verdict.args or {})))
        scope = verdict.scope
        self.late.append(
            ToolDecisionEvent(item.call, "allow", by, item.reason, scope=scope, id=request_id)
        )
        step = self.asking.step if self.asking is not None else None
        asked_by_step = step is not None and self.chain.calls[item.depth].obj is step
        start = item.depth if edited and asked_by_step else item.depth + 1
        while True:
            next_verdict, item.depth = await self.chain.before(item.call, start)
            if not isinstance(next_verdict, Ask):
                break
            if (
                edited
                and step is not None
                and self.chain.calls[item.depth].obj is step
                and not step.covers(seen, item.call)
            ):
                why = next_verdict.reason or "the approval policy asks"
                next_verdict = Deny(
                    f"its arguments were edited into ones that need an approval of their own "
                    f"({why}); call it again with them to have them asked about"
                )
                edited = False  # said in full already
                break
            start = item.depth + 1
        if isinstance(next_verdict, ToolCall):
            item.runs_as(next_verdict)
            self._note_policy(item, self.late)
        else:
            why = next_verdict.message
            if edited:
                why = f"the edited arguments are not allowed: {why}"
            self._refuse(item, why, self._layer_name(item), self.late)

    # -- running ---------------------------------------------------------------------

    async def _run_one(self, item: _Call) -> None:
        outcome = item.outcome
        if outcome is None:
            outcome = await invoke(item.call, self.tools, self.timeout, self.abort)
        if item.depth and self.chain.results:
            result = ToolResult(outcome.content, outcome.images, outcome.is_error)
            try:
                changed = await self.chain.after(item.call, result, item.depth)
            except MiddlewareError as exc:
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


def _no_one(reason: str) -> str:
    why = f" ({reason})" if reason else ""
    return (
        f"it needs a person's approval{why}, and no one could be asked. Run it where a "
        "person can answer, or allow it (an approval rule, or --allow NAME)."
    )
