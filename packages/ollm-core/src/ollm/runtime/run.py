"""One chat: the loop of turns, as an async generator of events.

``ChatRun.events`` is the only layer between the provider's stream and the caller: text
events pass through as the same objects, with no task, channel or cancel scope per
event (a cancel scope costs more than all the rest of the path). Abort is checked
between events with one attribute read; waits that may block (tools, token counting,
a provider that does not watch the signal itself) run under the signal's guard.
Nothing is yielded inside a cancel scope or a task group, so the caller may stop
iterating, cancel, or drop the iterator at any point.

Internal: not part of ollm's public API (the chat loop behind ``ollm.ChatClient.chat``);
its layout may change in any release.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

import anyio
import msgspec

from ollm.errors import ErrorCode, MiddlewareError, OllmError, PluginError
from ollm.registries.strategies import StrategyRegistry
from ollm.registries.tokens import IncrementalCount
from ollm.runtime.conversation import Conversation
from ollm.runtime.native import NativeStrategy
from ollm.runtime.provider_stream import error_event, guarded
from ollm.runtime.selection import StrategySelection
from ollm.runtime.settings import DEFAULT_CONTEXT_WINDOW, ChatSettings
from ollm.runtime.steps import Limits, TurnEnd, refusals, turn_end
from ollm.runtime.tokens import TokenBudget, count_request_tokens
from ollm.runtime.tool_runner import ToolOutcome, run_tool_calls, without_images
from ollm.runtime.toolsets import ToolsetSessions
from ollm.runtime.turn import Turn, tool_message
from ollm.runtime.validate import history_problem
from ollm.runtime.window import AUTO, AutoWindow
from ollm.tools.tool import Tool, may_hold
from ollm.types.abort import AbortSignal
from ollm.types.events import (
    ChatEvent,
    ErrorEvent,
    FinishEvent,
    NoticeEvent,
    ProviderEvent,
    TextEvent,
    TokenWarningEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    TurnCompleteEvent,
    Usage,
)
from ollm.types.messages import Message, ToolCall
from ollm.types.models import ModelCapabilities
from ollm.types.provider import ModelInspection, ProviderAdapter
from ollm.types.request import GenerationOptions, ProviderRequest, ToolSchema
from ollm.types.strategy import ToolStrategy

if TYPE_CHECKING:
    from ollm.runtime.approval import ApprovalBoard, ApprovalStep
    from ollm.runtime.compaction import Compaction
    from ollm.runtime.context import RunContext
    from ollm.runtime.middleware import Layer, MiddlewareChain
    from ollm.runtime.output import OutputStep
    from ollm.types.middleware import MiddlewareContext

__all__ = ["ChatRun"]

log = logging.getLogger(__name__)


class ChatRun:
    """The state of one chat, and ``events()``, the generator that runs it."""

    def __init__(
        self,
        context: RunContext,
        settings: ChatSettings,
        conversation: Conversation,
        prompt: Message | None,
        abort: AbortSignal,
    ) -> None:
        self.context = context
        self.settings = settings
        self.conversation = conversation
        self.prompt = prompt
        self.abort = abort
        self.provider: ProviderAdapter | None = None
        self.provider_name = ""
        self.model = ""
        self.tools: dict[str, Tool] = {}
        self.schemas: tuple[ToolSchema, ...] = ()
        self.strategy: ToolStrategy = NativeStrategy()
        self.context_window = DEFAULT_CONTEXT_WINDOW
        self.counted = IncrementalCount()  # the fallback count, message by message
        self.usage = Usage()
        self.tool_calls_used = 0
        # Whether tool results of this chat are in the history: a forced tool_choice
        # goes on the first request only (a server that honours it would loop).
        self.calls_answered = False
        self.notices: list[NoticeEvent] = []
        self.finish: FinishEvent | None = None
        # The chat's middleware and approval (built only when it has some: a chat without
        # imports none of it).
        self.chain: MiddlewareChain | None = None
        self._middleware_context: MiddlewareContext | None = None
        self.middleware_failed = False
        self._board: ApprovalBoard | None = None
        # Whether the caller sees the events (and so can answer a question): run() does not.
        self.answerable = True
        self._step: ApprovalStep | None = None
        # The turn under way: its partial reply is kept if the chat is left early.
        self._turn: Turn | None = None
        self._stream: AsyncIterator[ProviderEvent] | None = None
        self._toolsets: ToolsetSessions | None = None
        self._settled = False
        self.output: OutputStep | None = None

    def detach(self) -> None:
        """The caller left the chat without closing it (``break``, a dropped stream).

        Called at once, synchronously, when the chat's stream is let go, so the next
        chat on the conversation can start right away: the partial reply (what streamed
        of the current turn) goes into the history marked incomplete, unfinished tool
        calls get a result saying so, the chat is aborted and the conversation released.
        The generator itself is closed later by the event loop (its provider stream and
        toolsets closed then); it leaves the history alone.
        """
        if self._settled:
            return
        self.abort.abort("the chat was left")
        self._keep_partial("the chat was stopped")
        self.conversation._release(self)

    def _keep_partial(self, why: str) -> None:
        """Once: keep what the current turn streamed, marked incomplete."""
        if self._settled:
            return
        self._settled = True
        if self._turn is not None:
            self._turn.abandon(why, self._keeper())

    def stream(self) -> AsyncGenerator[ChatEvent, None]:
        """The chat's events as the caller gets them: ``events()`` itself, or, when the
        chat has middleware, ``events()`` through their ``on_event`` and ``on_finish``."""
        if self.settings.middleware:
            return self._through_middleware()
        return self.events()

    async def _through_middleware(self) -> AsyncGenerator[ChatEvent, None]:
        inner = self.events()
        finished = False
        try:
            try:
                async for event in inner:
                    chain = self.chain
                    if self.middleware_failed or chain is None:
                        yield event  # the failure's own events pass as they are
                        continue
                    if type(event) is FinishEvent:
                        await inner.aclose()  # the chat has ended: settled, released
                        finished = True
                        passed = await chain.event(event) if chain.events else []
                        await chain.finish(event)
                        for item in passed:
                            if type(item) is not FinishEvent:
                                yield item
                        yield event
                        return
                    if chain.events:
                        for item in await chain.event(event):
                            yield item
                    else:
                        yield event
            except MiddlewareError as exc:
                await inner.aclose()
                if exc.code == ErrorCode.CANCELLED:  # aborted while a middleware ran
                    yield FinishEvent("cancelled", self.usage)
                else:
                    yield ErrorEvent(exc.message, exc.code)
                    yield FinishEvent("error", self.usage)
        finally:
            await inner.aclose()
            chain = self.chain
            if not finished and chain is not None and not self.middleware_failed:
                # The caller left before the finish (a break, a closed stream): the chat
                # ended cancelled, and each middleware still hears of it (a trace ends).
                with anyio.CancelScope(shield=True):
                    await _quietly(chain.finish(FinishEvent("cancelled", self.usage)))

    async def events(self) -> AsyncGenerator[ChatEvent, None]:
        """Run the chat, yielding its events; the last one is always a ``FinishEvent``.

        The steps, in the order they run: ``_open`` (prepare), then per turn
        ``_next_request`` (the request, compacted, within the token budget), the stream
        (inline here: the loop every event passes through, so a text event costs one
        generator hop; ``Turn.take`` the rest), ``_settle`` (review, tools, commit),
        until a step sets ``self.finish``.
        """
        self.conversation._acquire(self)
        try:
            try:
                async for opening in self._open():
                    yield opening
                abort = self.abort
                number = 1
                while self._finished() is None:
                    request = await self._next_request(number)
                    for pending in self._pending:
                        yield pending
                    if self._finished() is not None:
                        break
                    turn = self._turn = Turn(number, self.conversation)
                    add_text = turn.text_parts.append
                    name, cut = self.provider_name, self.settings.on_truncation == "error"
                    # Typed output: the value is read from the pieces in batches.
                    partial = self.output.reader() if self.output is not None else None
                    try:
                        async for event in self._open_stream(request):
                            if type(event) is TextEvent:
                                add_text(event.text)
                                yield event
                                if partial is not None and partial.feed(event.text):
                                    yield partial.event()
                            else:
                                shown = turn.take(event, name, stop_at_truncation=cut)
                                if shown is None:
                                    break
                                yield shown
                            if abort._aborted:
                                break
                    except Exception as exc:
                        turn.error = error_event(exc, name)
                    await self._close_stream()
                    partial = None  # the partial value goes before the final one is read
                    async for settled in self._settle(turn):
                        yield settled
                    if not self._retry_turn:  # else the same turn is sent again
                        number += 1
            except Exception as exc:
                for failure in self._failed(exc):
                    yield failure
            yield self._finish()
        finally:
            await self._end()

    async def _open(self) -> AsyncIterator[ChatEvent]:
        """Prepare the chat (sets ``self.finish`` when it ends before its first turn):
        its middleware, the prompt into the history, the provider, model, tools and
        window; then its notices, and calls the history's last reply never had answered
        (a chat stopped while asking), run as their turn would have."""
        try:
            self.chain = self._middleware()
            resumed = Turn.resumed(0, self.conversation) if self.prompt is None else None
            if self.prompt is not None:
                self.conversation.append(await self._kept(self.prompt))
            with self.abort.guard():
                await self._prepare()
            self._add_approval()
        except OllmError as exc:
            if isinstance(exc, MiddlewareError) and exc.code == ErrorCode.CANCELLED:
                self.finish = FinishEvent("cancelled", self.usage)
                return
            self.middleware_failed = isinstance(exc, MiddlewareError)
            yield ErrorEvent(exc.message, exc.code)
            self.finish = FinishEvent("error", self.usage)
            return
        if self.abort.aborted:
            self.finish = FinishEvent("cancelled", self.usage)
            return
        for notice in self.notices:
            yield notice
        if resumed is not None:
            async for step in self._resume(resumed):
                yield step

    def _open_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """The provider's stream of ``request`` (through the tool strategy), guarded by
        the abort signal when the provider does not watch it itself."""
        assert self.provider is not None
        stream = self.strategy.stream(self.provider, request)
        if self.output is not None:  # typed output may read the stream (``tool``)
            stream = self.output.wrap(stream)
        if not getattr(self.provider, "handles_abort", False):
            stream = guarded(stream, self.abort)
        self._stream = stream
        return stream

    def _failed(self, exc: Exception) -> list[ChatEvent]:
        """What the chat's caller sees of a failure no step handled (sets the finish):
        a middleware's failure or cancellation, or an unexpected error; the turn under
        way is kept as it stands either way."""
        events: list[ChatEvent] = []
        if isinstance(exc, MiddlewareError) and exc.code == ErrorCode.CANCELLED:
            events += self._abandon("the chat was cancelled")  # aborted while one ran
            self.finish = FinishEvent("cancelled", self.usage)
            return events
        if isinstance(exc, MiddlewareError):
            self.middleware_failed = True
            events += self._abandon("a middleware failed")
            events.append(ErrorEvent(exc.message, exc.code))
        else:
            log.exception("unexpected error in a chat", exc_info=exc)
            events += self._abandon("an error occurred")
            events.append(
                ErrorEvent(
                    f"Unexpected error: {type(exc).__name__}: {exc}. The conversation is "
                    "intact; please report this with the steps that led to it.",
                    ErrorCode.INTERNAL_ERROR,
                )
            )
        self.finish = FinishEvent("error", self.usage)
        return events

    def _finish(self) -> FinishEvent:
        finish = self.finish
        assert finish is not None, "every step that ends the chat sets its finish"
        return finish

    async def _end(self) -> None:
        """Reached on every exit: the end, an early break by the caller, a cancel scope
        around the iteration, or the iterator being garbage-collected (then ``detach``
        has already settled the history)."""
        if self._board is not None:
            self._board.close()
        self._keep_partial("the chat was cancelled")
        await self._close_stream()
        if self._toolsets is not None:
            await self._toolsets.aclose()  # the toolsets given to this chat alone
        self.conversation._release(self)

    _pending: tuple[ChatEvent, ...] = ()
    _retry_turn = False
    auto_window: AutoWindow | None = None
    compaction: Compaction | None = None

    def _abandon(self, why: str) -> list[ToolCallResultEvent]:
        """The turn under way kept as it stands; its calls' results."""
        turn, self._turn = self._turn, None
        if turn is None:
            return []
        return turn.result_events(turn.abandon(why, self._keeper()))

    # -- middleware ------------------------------------------------------------------

    @property
    def board(self) -> ApprovalBoard:
        """The chat's questions to a person about tool calls (made on first need)."""
        if self._board is None:
            from ollm.runtime.approval import ApprovalBoard

            self._board = ApprovalBoard(self.context.approved)
        return self._board

    @property
    def middleware_context(self) -> MiddlewareContext:
        """What the chat's middleware are told of it (made on first need)."""
        if self._middleware_context is None:
            from ollm.types.middleware import MiddlewareContext

            self._middleware_context = MiddlewareContext(self.context.client, self.conversation)
        return self._middleware_context

    def _middleware(self) -> MiddlewareChain | None:
        """The chat's middleware, the names built (once per client); ``None`` without."""
        if not self.settings.middleware:
            return None
        layers = self.context.middleware(self.settings.middleware)
        return self._chain(layers)

    def _chain(self, layers: Sequence[Layer]) -> MiddlewareChain:
        from ollm.runtime.middleware import MiddlewareChain

        return MiddlewareChain(
            layers,
            self.middleware_context,
            timeout=self.settings.middleware_timeout,
            abort=self.abort,
        )

    def _keeper(self) -> Callable[[Message], Message] | None:
        """What makes a message of a reply cut short what the history keeps."""
        chain = self.chain
        return chain.message_now if chain is not None and chain.messages else None

    def _add_approval(self) -> None:
        """The approval step, innermost, when the chat has rules or a tool that asks."""
        policy = self.settings.approval
        if not (policy is not None and policy.strict) and not any(
            may_hold(tool.approval) for tool in self.tools.values()
        ):
            return
        from ollm.runtime.approval import ApprovalStep
        from ollm.runtime.middleware import layer_of
        from ollm.tools.approval import ApprovalPolicy

        self._step = ApprovalStep(policy or ApprovalPolicy(), self.tools)
        layers = self.chain.layers if self.chain is not None else ()
        self.chain = self._chain((*layers, layer_of(self._step)))

    async def _kept(self, message: Message) -> Message:
        """``message`` as the history keeps it (through the middleware's ``on_message``)."""
        chain = self.chain
        if chain is not None and chain.messages:
            return await chain.message(message)
        return message

    # -- before the first turn -------------------------------------------------------

    async def _prepare(self) -> ProviderAdapter:
        """Resolve the provider, model, tools, strategy and context window."""
        settings = self.settings
        context = self.context
        provider = self.provider = context.provider(settings.provider)
        self.provider_name = provider.name
        model = settings.model or getattr(provider, "default_model", None)
        if not model:
            raise OllmError(
                "No model chosen. Pass model=... (for example model='llama3.2'), "
                "or run: ollm chat -m MODEL",
                code=ErrorCode.INVALID_REQUEST,
            )
        self.model = model
        if self._middleware_context is not None:
            self._middleware_context.provider = provider.name
            self._middleware_context.adapter = provider
            self._middleware_context.model = model
        if settings.tool_choice != "none":
            renamed: list[str] = []
            self.tools = await context.tools(settings.tools, self._chat_toolsets, renamed)
            self.notices += [NoticeEvent(message, "tool_name") for message in renamed]
        self.schemas = tuple(tool.schema for tool in self.tools.values())

        capabilities = await self._size_window(provider, model)
        forced = self.conversation.id in context.compact_next
        if settings.compact != "off" or forced:
            context.compact_next.discard(self.conversation.id)
            from ollm.runtime.compaction import Compaction, ContextView  # only when compacting

            view = context.views.setdefault(self.conversation.id, ContextView())
            strategy = "auto" if settings.compact == "off" else settings.compact
            self.compaction = Compaction.named(
                view, strategy, settings.compact_at, self.counted, context.registries.compactors
            )
            if forced:
                self.compaction.now()
        if self.tools:
            self.strategy, notice = self.selection.initial(capabilities)
            if notice is not None:
                self.notices.append(notice)
        if settings.output is not None:
            from ollm.runtime.output import OutputStep  # only a chat with typed output

            self.output = OutputStep.of(settings, context, provider.name, model)
            if self.output is not None:
                await self.output.learn(provider, capabilities)
        return provider

    async def _size_window(self, provider: ProviderAdapter, model: str) -> ModelCapabilities | None:
        """Set the context window (asked, the options', the model's, or ``auto``'s) and
        the tool strategy's selection; the model's capabilities when they were needed."""
        settings = self.settings
        context = self.context
        auto = settings.context_window == AUTO
        asked = None if auto else cast(int | None, settings.context_window)
        window = asked or settings.options.context_window
        self.selection = StrategySelection(
            context.registries.strategies if self.tools else StrategyRegistry(),
            context.refused,
            provider.name,
            model,
            settings.tool_strategy,
            recover=settings.recover_text_tool_calls,
        )
        wants_auto = bool(self.tools) and settings.tool_strategy == "auto"
        capabilities = None
        if (window is None or (wants_auto and not self.selection.remembered)) and callable(
            getattr(provider, "model_capabilities", None)
        ):
            capabilities = await context.capabilities(cast(ModelInspection, provider), model)
        if window is None and capabilities is not None:
            window = capabilities.context_window
        if auto:
            self.auto_window = AutoWindow(
                context.windows,
                (provider.name, model),
                window,
                capabilities.max_context_window if capabilities is not None else None,
            )
            window = self.auto_window.window
        self.context_window = window or DEFAULT_CONTEXT_WINDOW
        return capabilities

    def _chat_toolsets(self) -> ToolsetSessions:
        if self._toolsets is None:
            self._toolsets = ToolsetSessions()
        return self._toolsets

    # -- each turn -------------------------------------------------------------------

    def _request(self) -> ProviderRequest:
        settings = self.settings
        options = settings.options
        window = settings.context_window
        if isinstance(window, int) and options.context_window is None:
            options = options.merged(type(options)(context_window=window))
        request = ProviderRequest(
            model=self.model,
            messages=self.conversation.messages,
            system_prompt=settings.system,
            tools=self.schemas,
            tool_choice=self._tool_choice(),
            options=options,
            response_format=settings.response_format,
            think=settings.think,
            abort=self.abort,
            tool_call_deltas=settings.tool_call_deltas,
            conversation_id=self.conversation.id,
        )
        if self.output is not None:
            request = self.output.prepare(request, self.strategy)
        return request

    def _tool_choice(self) -> str:
        """The chat's ``tool_choice``; a forced one (``required``, a tool's name) only until
        the first results are in: the model then answers, or calls again of its own accord."""
        choice = self.settings.tool_choice
        if not self.schemas or (self.calls_answered and choice not in ("auto", "none")):
            return "auto"
        return choice

    async def _next_request(self, number: int) -> ProviderRequest:
        """The request for turn ``number``, checked against the token budget.

        Sets ``self.finish`` instead when the chat must end before sending anything;
        ``self._pending`` holds the events to emit first.
        """
        self._pending = ()
        if self._middleware_context is not None:
            self._middleware_context.turn = number
        request = self._request()
        if self.output is not None and self.output.notices:
            self._pending += self.output.take_notices()
        if number > self.settings.max_turns:
            last = self.strategy.wrap_up(request)
            if last is None:
                self.finish = FinishEvent("max_turns", self.usage)
                return request
            request = last
        if self.compaction is not None:
            try:
                request = await self._compacted(request)
            except PluginError as exc:  # a plugin's compactor failed
                self._pending = (ErrorEvent(exc.message, exc.code),)
                self.finish = FinishEvent("error", self.usage)
                return request
            if self.finish is not None:
                return request
        chain = self.chain
        if chain is not None and chain.requests:
            request = await chain.request(request)
        problem = history_problem(request.messages)
        if problem is not None:
            self._pending = (_invalid_history(problem),)
            self.finish = FinishEvent("error", self.usage)
            return request
        assert self.provider is not None
        # Counted as it will be sent: a strategy may render tools and history as text.
        sent = self.strategy.prepare(request)
        with self.abort.guard():
            estimated = await count_request_tokens(
                sent,
                self.provider,
                self.context.registries.token_counters,
                self.compaction.count if self.compaction is not None else self.counted,
            )
        if self.abort.aborted:
            self.finish = FinishEvent("cancelled", self.usage)
            return request
        reserved = request.options.max_tokens or 0
        if self.auto_window is not None:
            request = self._resized(request, estimated + reserved)
        budget = TokenBudget(estimated, self.context_window, reserved)
        if budget.blocked:
            self._pending += (ErrorEvent(budget.explain(self.model), ErrorCode.TOKEN_LIMIT),)
            self.finish = FinishEvent("token_limit", self.usage)
        elif budget.warn:
            self._pending += (
                TokenWarningEvent(budget.estimated, budget.limit, self.context_window),
            )
        return request

    async def _compacted(self, request: ProviderRequest) -> ProviderRequest:
        """What ``request`` sends of the conversation, compacted when it nears the
        window (a ``CompactionEvent`` pending when it was)."""
        compaction = self.compaction
        assert compaction is not None
        window = self.context_window
        if self.auto_window is not None and self.auto_window.trained:
            window = self.auto_window.trained  # the window grows before anything is cut
        limit = max(0, window - (request.options.max_tokens or 0))
        whole = request
        request, event = compaction.apply(whole, limit)
        if compaction.to_summarize and event is not None:
            assert self.provider is not None
            request, event, notice = await compaction.summarize(
                self.provider, self.model, whole, event, limit, self.abort
            )
            if notice is not None:
                self._pending += (notice,)
        refused = compaction.unshortened(event)
        if refused is not None:  # sent again, the same request would be refused again
            self._pending += (refused,)
            self.finish = FinishEvent("error", self.usage)
            return request
        if event is not None:
            length = len(self.conversation.messages)
            self._pending += (msgspec.structs.replace(event, conversation_length=length),)
        return request

    def _resized(self, request: ProviderRequest, needed: int) -> ProviderRequest:
        """``request`` with the window ``context_window="auto"`` chose for ``needed``
        tokens (a ``context_resized`` notice pending when it grew)."""
        assert self.auto_window is not None
        notice = self.auto_window.fit(needed)
        if notice is not None:
            self._pending += (notice,)
        self.context_window = self.auto_window.window
        options = request.options.merged(GenerationOptions(context_window=self.context_window))
        return msgspec.structs.replace(request, options=options)

    async def _settle(self, turn: Turn) -> AsyncIterator[ChatEvent]:
        """After a turn's stream: review the reply, run its tools, commit it to the
        history, and judge how the turn ended.

        Sets ``self.finish`` when the chat ends here, ``self._retry_turn`` when the same
        turn must be sent again (compacted harder, or after a switch to ReAct).
        """
        self._retry_turn = False
        if turn.usage is not None:
            self.usage = self.usage + turn.usage
        unsettled = self._unsuccessful(turn)
        if unsettled is not None:
            for event in unsettled:
                yield event
            return
        wrap_up = turn.number > self.settings.max_turns
        reply = turn.reply()
        review = self.strategy.review(reply)
        message = review.message if review is not None and review.message else reply
        if review is not None:
            for event in review.events:
                yield event
        calls = message.tool_calls
        announced = {call.id for call in turn.calls}
        for call in calls:
            if call.id not in announced:
                # A strategy's review may produce calls the stream never showed.
                yield ToolCallStartEvent(call, turn.number)
        limits = Limits(self.settings.max_turns, self.settings.max_tool_calls, self.tool_calls_used)
        refused, self.tool_calls_used = refusals(
            calls, too_deep=turn.too_deep, review=review, wrap_up=wrap_up, limits=limits
        )
        ran = _Ran(message)
        if calls:
            async for event in self._run_calls(turn, ran, refused):
                yield event
        for result in await self._commit(turn, ran.message, ran.outcomes):
            yield result
        if ran.failure is not None:
            raise ran.failure
        end = turn_end(
            aborted=self.abort.aborted,
            review=review,
            wrap_up=wrap_up,
            calls=len(calls),
            reason=turn.finish_reason,
        )
        for event in await self._ended(turn, end, message.text, calls=len(calls)):
            yield event

    def _unsuccessful(self, turn: Turn) -> list[ChatEvent] | None:
        """The events of a turn that did not succeed (the chat aborted, the reply
        refused or failed), with the finish or retry it leads to set; ``None`` when the
        turn succeeded and settles on."""
        if self.abort.aborted:
            self.finish = FinishEvent("cancelled", self.usage)
            return list(self._abandon("the chat was cancelled"))
        compaction = self.compaction
        if compaction is not None and turn.error is not None:
            turn.error = compaction.refusal(turn.error, turn.streamed_anything)
            if turn.error is None:  # compacted harder: the same turn again
                return self._retry(turn, [])
        elif compaction is not None:
            compaction.settled()
        if turn.error is None:
            return None
        switch = self.selection.after_refusal(self.strategy, turn.error, turn.streamed_anything)
        if switch is not None:
            self.strategy, notice = switch
            return self._retry(turn, [notice])
        # Only the output tool was offered: asked for as auto asks, the turn may pass.
        output = self.output
        if (
            output is not None
            and not self.schemas
            and output.after_refusal(turn.error, turn.streamed_anything)
        ):
            return self._retry(turn, [])
        events: list[ChatEvent] = [*self._abandon("the reply failed")]
        events.append(self.selection.explain(self.strategy, turn.error))
        self.finish = FinishEvent("error", self.usage)
        return events

    def _retry(self, turn: Turn, events: list[ChatEvent]) -> list[ChatEvent]:
        """Send ``turn`` again: nothing of it goes into the history."""
        self._turn = None
        turn.committed = True
        self._retry_turn = True
        return events

    async def _ended(self, turn: Turn, end: TurnEnd, text: str, *, calls: int) -> list[ChatEvent]:
        """How a committed turn ended: the typed output's judgement, the turn's
        completion, a correction for the model (into the history), or the finish."""
        judged: list[ChatEvent] = []
        if self.output is not None:
            last = turn.number >= self.settings.max_turns  # or past it, wrapping up
            end, judged = self.output.judge(end, text, calls=calls, last=last)
        events: list[ChatEvent] = []
        if end.error is not None:
            events.append(end.error)
        if end.complete:
            events.append(TurnCompleteEvent(turn.number, turn.finish_reason, calls, turn.usage))
        events += judged
        if end.feedback is not None:
            self.conversation.append(await self._kept(Message.user(end.feedback)))
        if end.finish is not None:
            self.finish = FinishEvent(end.finish, self.usage)
        return events

    async def _run_calls(
        self, turn: Turn, ran: _Ran, refused: Mapping[str, ToolOutcome]
    ) -> AsyncIterator[ChatEvent]:
        """Run the calls of ``ran.message`` that are not refused, through the middleware
        (yielding the approval questions and decisions); ``ran`` gets every call's
        outcome in call order, the message with its calls as they ran, and the
        middleware's failure if one failed."""
        calls = ran.message.tool_calls
        chain = self.chain
        if chain is not None and chain.calls:
            from ollm.runtime.tool_phase import Asking, ToolPhase

            async def reply_first(current: Sequence[ToolCall]) -> None:
                message = msgspec.structs.replace(ran.message, tool_calls=tuple(current))
                turn.commit_reply(await self._kept(message))

            phase = ToolPhase(
                chain,
                calls,
                refused,
                self.tools,
                timeout=self.settings.tool_timeout,
                abort=self.abort,
                asking=Asking(
                    self.board,
                    self.settings.approver,
                    answerable=self.answerable,
                    step=self._step,
                    before_asking=reply_first,
                ),
            )
            async for event in phase.run():
                yield event
            outcomes, executed, ran.failure = phase.outcomes, phase.executed, phase.failure
            if executed != calls:
                ran.message = msgspec.structs.replace(ran.message, tool_calls=executed)
        else:
            outcomes = await run_tool_calls(
                calls,
                self.tools,
                timeout=self.settings.tool_timeout,
                abort=self.abort,
                preset=refused,
            )
        if any(o.images for o in outcomes) and not await self._sees_images():
            outcomes = without_images(outcomes, self.model)
        ran.outcomes = outcomes

    async def _resume(self, turn: Turn) -> AsyncIterator[ChatEvent]:
        """Run the calls the history's last reply never had answered (a chat stopped
        while a person was asked about them), as its turn would have."""
        self._turn = turn
        message = self.conversation[turn.reply_index]
        for call in turn.calls:
            yield ToolCallStartEvent(call, turn.number)
        limits = Limits(self.settings.max_turns, self.settings.max_tool_calls, self.tool_calls_used)
        refused, self.tool_calls_used = refusals(
            turn.calls, too_deep=(), review=None, wrap_up=False, limits=limits
        )
        ran = _Ran(msgspec.structs.replace(message, tool_calls=tuple(turn.calls)))
        async for event in self._run_calls(turn, ran, refused):
            yield event
        executed = {call.id: call for call in ran.message.tool_calls}
        whole = msgspec.structs.replace(
            message, tool_calls=tuple(executed.get(c.id, c) for c in message.tool_calls)
        )
        for result in await self._commit(turn, whole, ran.outcomes):
            yield result
        if ran.failure is not None:
            raise ran.failure
        if self.abort.aborted:
            self.finish = FinishEvent("cancelled", self.usage)

    async def _commit(
        self, turn: Turn, message: Message, outcomes: list[ToolOutcome]
    ) -> list[ToolCallResultEvent]:
        """Commit step: the reply and its results into the history, through the
        middleware's ``on_message``; the results' events, in call order."""
        if outcomes:
            self.calls_answered = True
        chain = self.chain
        if chain is None or not chain.messages:
            turn.commit(message, outcomes)
        else:
            reply = await chain.message(message)
            results = [await chain.message(tool_message(o)) for o in outcomes]
            turn.commit(reply, results=results)
        self._turn = None
        return turn.result_events(outcomes)

    async def _sees_images(self) -> bool:
        """Whether the model takes images (unknown counts as yes: the server will say)."""
        if self.provider is None or not callable(
            getattr(self.provider, "model_capabilities", None)
        ):
            return True
        with self.abort.guard():
            found = await self.context.capabilities(
                cast(ModelInspection, self.provider), self.model
            )
        return found is None or found.vision is not False

    def _finished(self) -> FinishEvent | None:
        # A call, not an attribute read, so that type checkers do not assume the
        # value cannot have changed while a helper ran.
        return self.finish

    async def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        aclose = getattr(stream, "aclose", None)
        if aclose is None:
            return
        # Shielded: closing must finish (and release the connection) even when the
        # chat is being cancelled.
        with anyio.CancelScope(shield=True):
            try:
                await aclose()
            except Exception:
                log.warning("closing the provider's stream failed", exc_info=True)


def _invalid_history(problem: str) -> ErrorEvent:
    return ErrorEvent(
        f"The request was not sent: its history is not valid ({problem}). Calls the "
        "conversation ends with, never answered, run first with chat() and no prompt; a "
        "middleware or compactor that changes requests must keep calls and results together. The "
        "conversation itself is intact.",
        ErrorCode.INVALID_HISTORY,
    )


class _Ran:
    """What running a reply's calls gave: the reply with its calls as they ran, their
    outcomes in call order, and the middleware's failure if one failed."""

    __slots__ = ("failure", "message", "outcomes")

    def __init__(self, message: Message) -> None:
        self.message = message
        self.outcomes: list[ToolOutcome] = []
        self.failure: MiddlewareError | None = None


async def _quietly(done: Awaitable[None]) -> None:
    # A middleware that fails while a stream is being closed is logged, not raised: the
    # caller closing it has nobody left to tell.
    try:
        await done
    except MiddlewareError as exc:
        log.warning("%s", exc.message)
