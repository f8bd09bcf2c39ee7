"""The approval of tool calls, built on the middleware: the policy's step, and the board
where the questions put to a person wait for their answer.

The step is the chat's innermost middleware: its ``before_tool_call`` asks the chat's
``ApprovalPolicy`` (and the tool's own default) and answers the call, ``Deny`` or
``Ask``, noting each decision for the chat's events. A question goes on the board; the
answer comes from the client's approver, or from ``ChatStream.approve``/``deny`` in any
thread. A person's approval for the chat (or the client) answers the tool's other
questions at once, and its later calls without asking.

Internal: not part of ollm's public API (a step of ``ollm.ChatClient.chat``); its layout
may change in any release.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.to_thread

from ollm.runtime.middleware import is_async
from ollm.tools.approval import ApprovalDecision, ApprovalPolicy
from ollm.tools.tool import Tool
from ollm.types.abort import AbortSignal
from ollm.types.events import ApprovalRequestEvent
from ollm.types.messages import ToolCall
from ollm.types.middleware import Approve, Ask, Deny, MiddlewareContext

__all__ = ["ApprovalBoard", "ApprovalStep", "Approver", "Verdict", "ask_approver"]

log = logging.getLogger(__name__)

Verdict = Approve | Deny
Approver = Callable[[ApprovalRequestEvent], bool | Verdict | Awaitable[bool | Verdict]]
"""Decides an approval request at once: ``True``/``Approve(...)`` runs the call,
``False``/``Deny(message)`` refuses it (sync or async; a sync one runs in a thread)."""

NAME = "approval"
_ids = itertools.count(1)


class ApprovalStep:
    """The innermost middleware of a chat whose calls need approving."""

    name = NAME

    def __init__(self, policy: ApprovalPolicy, tools: Mapping[str, Tool]) -> None:
        self.policy = policy
        self.tools = tools
        self.decisions: dict[str, ApprovalDecision] = {}  # call id: the policy's decision
        self.decided: dict[str, ToolCall] = {}  # call id: the call as it was decided

    async def before_tool_call(
        self, ctx: MiddlewareContext, call: ToolCall
    ) -> ToolCall | Deny | Ask:
        """The policy's decision for ``call``, noted (async: it runs inline)."""
        decision = self.decisions[call.id] = self.policy.decide(call, self.tools.get(call.name))
        self.decided[call.id] = call
        if decision.action == "allow":
            return call
        if decision.action == "deny":
            return Deny(decision.reason or "an approval rule does not allow it")
        return Ask(decision.reason)

    def covers(self, seen: ToolCall, now: ToolCall) -> bool:
        """Whether a person's approval of ``seen`` answers the policy's question about
        ``now`` (the same call, its arguments edited): the policy asks about both, for
        the same reason."""
        tool = self.tools.get(now.name)
        return self.policy.decide(seen, tool) == self.policy.decide(now, tool)


class _Question:
    """One question on the board: its request, its answer once given, its waiter."""

    __slots__ = ("answered", "by", "request", "verdict")

    def __init__(self, request: ApprovalRequestEvent) -> None:
        self.request = request
        self.verdict: Verdict | None = None
        self.by = ""
        # Fires when the answer comes, in whatever thread it comes from.
        self.answered = AbortSignal()


class ApprovalBoard:
    """The questions of one chat waiting for a person's answer (thread-safe), and the
    tools a person approved for the chat (``chat``) or for the client (``client``)."""

    def __init__(self, client_approved: set[str]) -> None:
        self._lock = threading.Lock()
        self._questions: dict[str, _Question] = {}
        self.chat_approved: set[str] = set()
        self.client_approved = client_approved

    def remembered(self, tool: str) -> str | None:
        """``chat`` or ``client`` when a person approved ``tool`` that far, else ``None``."""
        with self._lock:
            if tool in self.chat_approved:
                return "chat"
            if tool in self.client_approved:
                return "client"
        return None

    def ask(self, call: ToolCall, reason: str) -> ApprovalRequestEvent:
        """Put a question about ``call`` on the board; the event that asks it."""
        request = ApprovalRequestEvent(call, reason, f"approval_{next(_ids)}")
        with self._lock:
            self._questions[request.id] = _Question(request)
        return request

    def pending(self, request_id: str) -> bool:
        """Whether the question ``request_id`` still waits for its answer."""
        with self._lock:
            question = self._questions.get(request_id)
            return question is not None and question.verdict is None

    def answer(self, request_id: str, verdict: Verdict, by: str = "person") -> bool:
        """Answer a question (from any thread); ``False`` if it was answered already.

        An approval for the chat or the client answers the tool's other questions too.
        """
        if not isinstance(verdict, (Approve, Deny)):
            raise TypeError("the answer must be an ollm.Approve or an ollm.Deny")
        with self._lock:
            question = self._questions.get(request_id)
            if question is None:
                waiting = ", ".join(q for q, v in self._questions.items() if v.verdict is None)
                raise ValueError(
                    f"no approval request {request_id!r} was made in this chat "
                    f"(waiting: {waiting or 'none'})"
                )
            if question.verdict is not None:
                return False
            answered = [(question, verdict, by)]
            if isinstance(verdict, Approve) and verdict.scope != "once":
                tool = question.request.call.name
                (self.chat_approved if verdict.scope == "chat" else self.client_approved).add(tool)
                answered += [
                    (other, Approve(verdict.scope), verdict.scope)
                    for other in self._questions.values()
                    if other.verdict is None
                    and other is not question
                    and other.request.call.name == tool
                ]
            for each, given, who in answered:
                each.verdict, each.by = given, who
        for each, _, _ in answered:
            each.answered.abort("answered")
        return True

    async def wait(self, request_id: str, abort: AbortSignal) -> tuple[Verdict, str] | None:
        """The answer to ``request_id`` and who gave it; ``None`` if the chat was
        aborted first."""
        with self._lock:
            question = self._questions[request_id]
        with abort.guard(), question.answered.guard():
            await anyio.sleep_forever()
        if question.verdict is None:
            return None
        return question.verdict, question.by

    def close(self) -> None:
        """The chat has ended: the questions left are no longer asked."""
        with self._lock:
            for question in self._questions.values():
                if question.verdict is None:
                    question.verdict, question.by = Deny("the chat ended"), "no one"


async def ask_approver(approver: Approver, request: ApprovalRequestEvent) -> Verdict:
    """The approver's answer to ``request``, as an ``Approve`` or a ``Deny`` (an approver
    that fails, or answers something else, refuses the call)."""
    try:
        if is_async(approver):
            answer: Any = await approver(request)  # type: ignore[misc]
        else:
            answer = await anyio.to_thread.run_sync(approver, request, abandon_on_cancel=True)
            if inspect.isawaitable(answer):
                answer = await answer
    except Exception as exc:
        log.warning("the approver failed on %s", request.call.name, exc_info=True)
        return Deny(f"the approver failed ({type(exc).__name__}: {exc})")
    if answer is True:
        return Approve()
    if answer is False:
        return Deny("a person declined it")
    if isinstance(answer, (Approve, Deny)):
        return answer
    return Deny(f"the approver answered {answer!r}, which is neither an approval nor a denial")
