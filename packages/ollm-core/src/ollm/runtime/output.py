"""A chat's typed output (``chat(..., output=T)``): how each request asks for it, what
its stream shows of it, and what the final reply gives.

``OutputStep`` is all the chat loop knows of typed output: ``prepare`` puts the schema
in each request (through the output strategy in use), ``reader`` reads the value while
a turn's text streams (the loop shows a ``PartialOutputEvent`` when it grew), and
``judge`` decides, from the final reply, between the value
(``OutputEvent``), a correction turn (through the same feedback path as ReAct's), and
``OUTPUT_INVALID``. A server that ignored the native constraint (the reply is not JSON
at all) switches its model to the prompted mode for the client's lifetime, without
spending a retry. A strategy that needs native tool calling (``tool``) gives way to what
``auto`` asks with (the native constraint, or the prompt with ReAct), with a notice, for
a model without it (its capabilities, a "does not support tools" answer) or a tool
strategy of its own text protocol; ``wrap`` puts its ``stream`` around the provider's,
on the turns that use it.

Internal: not part of ollm's public API (a step of ``ollm.ChatClient.chat``); its layout
may change in any release.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, cast

import msgspec

from ollm.errors import ErrorCode
from ollm.output.native import NativeOutput
from ollm.output.partial import PartialJSON
from ollm.output.schema import OutputMismatch, OutputType
from ollm.output.tool import ToolOutput
from ollm.runtime.steps import TurnEnd
from ollm.types.events import (
    ChatEvent,
    ErrorEvent,
    NoticeEvent,
    OutputEvent,
    ProviderEvent,
)
from ollm.types.models import ModelCapabilities
from ollm.types.output import OutputStrategy
from ollm.types.provider import ModelInspection, ProviderAdapter
from ollm.types.request import ProviderRequest

if TYPE_CHECKING:
    from ollm.runtime.context import RunContext
    from ollm.runtime.settings import ChatSettings

__all__ = ["OutputStep"]

PROMPTED = "prompted"


class OutputStep:
    """The typed output of one chat: its type, its strategies and the retries left."""

    def __init__(
        self,
        output: OutputType,
        *,
        retries: int,
        context: RunContext,
        key: tuple[str, str],
        strategy: str = "auto",
    ) -> None:
        self.type = output
        self.retries_left = retries
        self.retries = retries
        self.context = context
        self.key = key
        self._chosen: OutputStrategy
        if strategy in ("auto", "native"):
            self._chosen = NativeOutput()
        elif strategy == "tool":
            self._chosen = ToolOutput()
        else:
            self._chosen = context.registries.output_strategies.create(strategy)
        self._auto = strategy == "auto"
        self._prompted: OutputStrategy | None = None
        self._native: OutputStrategy | None = None  # auto's, or tool's fallback's
        self.current = self._chosen
        # Why the chosen strategy cannot be used (it needs native tools), once known.
        self._cannot: str | None = None
        self._said: str | None = None
        self.notices: list[NoticeEvent] = []

    @classmethod
    def of(
        cls, settings: ChatSettings, context: RunContext, provider: str, model: str
    ) -> OutputStep | None:
        """The chat's output step, or ``None`` when it asks for no typed output."""
        if settings.output is None:
            return None
        return cls(
            OutputType(settings.output),
            retries=settings.output_retries,
            context=context,
            key=(provider, model),
            strategy=settings.output_strategy,
        )

    @property
    def uses_tools(self) -> bool:
        """Whether the chosen strategy needs native tool calling."""
        return bool(getattr(self._chosen, "uses_tools", False))

    async def learn(
        self, provider: ProviderAdapter, capabilities: ModelCapabilities | None
    ) -> None:
        """Before the first request: whether the model can call tools, when the chosen
        strategy needs it (``capabilities`` when the chat asked already)."""
        if not self.uses_tools:
            return
        if capabilities is None and callable(getattr(provider, "model_capabilities", None)):
            inspection = cast(ModelInspection, provider)
            capabilities = await self.context.capabilities(inspection, self.key[1])
        if self.key in self.context.refused or (
            capabilities is not None and capabilities.tools is False
        ):
            self._cannot = f"{self.key[1]} cannot call tools natively"

    # -- the requests ------------------------------------------------------------------

    def prepare(self, request: ProviderRequest, tool_strategy: object) -> ProviderRequest:
        """``request`` asking for the output, the way this turn asks for it."""
        self.current = self._strategy(tool_strategy)
        return self.current.prepare(request, self.type.schema)

    def _strategy(self, tool_strategy: object) -> OutputStrategy:
        # A tool strategy that speaks its own text protocol (ReAct) cannot take a JSON
        # constraint, nor a forced call; nor can a model whose server ignored it.
        text_protocol = getattr(tool_strategy, "text_protocol", False)
        if self.uses_tools and (self._cannot is not None or text_protocol):
            why = self._cannot or (
                f"the {getattr(tool_strategy, 'name', '?')} tool strategy speaks a text "
                "protocol of its own"
            )
            return self._given_way(why, self._as_auto(text_protocol))
        if self._auto:
            return self._as_auto(text_protocol)
        return self._chosen

    def _as_auto(self, text_protocol: bool) -> OutputStrategy:
        """What ``auto`` asks with: the native constraint, or the prompt alone (ReAct, a
        server that ignored the constraint)."""
        if text_protocol or self.key in self.context.format_ignored:
            return self._prompted_strategy()
        if self._native is None:
            self._native = self._chosen if self._auto else NativeOutput()
        return self._native

    def _given_way(self, why: str, instead: OutputStrategy) -> OutputStrategy:
        """``instead`` of a strategy that needs native tools: what ``auto`` would ask
        with (a constraint needs no tools: Ollama's ``format``, llama.cpp's grammar).
        Said once for each reason."""
        if why != self._said:
            self._said = why
            self.notices.append(
                NoticeEvent(
                    f"{why}: the {self._chosen.name} output strategy (the value as a forced "
                    f"tool call) cannot work; the value is asked for as auto asks for it "
                    f"({instead.name}) instead.",
                    kind="output_strategy",
                )
            )
        return instead

    def after_refusal(self, error: ErrorEvent | None, streamed: bool) -> bool:
        """Whether to send the turn again after ``error`` (to a request that offered no
        tool but the output tool): a "does not support tools" answer (the model is
        remembered as refusing tools, and the value asked for as ``auto`` asks from now
        on)."""
        if (
            error is None
            or error.code != ErrorCode.TOOLS_UNSUPPORTED
            or streamed
            or not getattr(self.current, "uses_tools", False)
            or self._cannot is not None  # once: a second refusal is the chat's error
        ):
            return False
        self.context.refused.add(self.key)
        self._cannot = f"{self.key[1]} does not support tools"
        return True

    def wrap(self, stream: AsyncIterator[ProviderEvent]) -> AsyncIterator[ProviderEvent]:
        """The provider's ``stream`` through this turn's strategy, when it reads it."""
        reads = getattr(self.current, "stream", None)
        if reads is None:
            return stream
        return cast(AsyncIterator[ProviderEvent], reads(stream))

    def take_notices(self) -> tuple[NoticeEvent, ...]:
        """The notices to show before the next request (once each)."""
        notices, self.notices = tuple(self.notices), []
        return notices

    def _prompted_strategy(self) -> OutputStrategy:
        if self._prompted is None:
            registry = self.context.registries.output_strategies
            self._prompted = (
                registry.create(PROMPTED) if PROMPTED in registry else NativeOutput(constrain=False)
            )
        return self._prompted

    # -- the stream ------------------------------------------------------------------

    def reader(self) -> PartialJSON:
        """A reader of one turn's text: append the pieces to its ``pieces``; once they
        number ``due``, ``read()`` says whether the value read so far changed, and
        ``event()`` is then the ``PartialOutputEvent`` to show."""
        return PartialJSON()

    # -- the final reply ---------------------------------------------------------------

    def judge(
        self, end: TurnEnd, text: str, *, calls: int, last: bool
    ) -> tuple[TurnEnd, list[ChatEvent]]:
        """After a turn: the value (an ``OutputEvent`` before the finish), a correction
        (``feedback`` and no finish), or ``OUTPUT_INVALID``; ``end`` as it was when the
        chat goes on anyway (tool calls, a strategy's own correction)."""
        if end.error is not None or end.feedback is not None:
            return end, []
        if end.finish not in ("stop", "length", "max_turns"):
            return end, []
        if calls:
            return self._invalid(
                end,
                text,
                ("$: no value: the chat reached its turn limit while the model called tools",),
            )
        events: list[ChatEvent] = []
        # ``auto``'s constraint, or the one a strategy that needs tools gave way to.
        adaptive = self.current is self._native
        ignored = adaptive and self.current.constrains and _not_json(text)
        if ignored:
            self.context.format_ignored.add(self.key)
            provider, model = self.key
            events.append(
                NoticeEvent(
                    # Named as what it is: a provider in the process has no server, and
                    # one that cannot constrain was sent nothing it could obey.
                    f"{model} ({provider}) answered prose although the request asked for a "
                    "JSON value (response_format); this client asks for the value in the "
                    "prompt alone from now on.",
                    kind="format_ignored",
                )
            )
        try:
            value = self.type.decode(self.current.extract(text))
        except OutputMismatch as exc:
            if not last and (ignored or self.retries_left > 0):
                if not ignored:
                    self.retries_left -= 1
                feedback = _correction(exc.errors, getattr(self.current, "answer_again", None))
                return TurnEnd(None, end.complete, feedback, None), events
            after, invalid = self._invalid(end, text, exc.errors)
            return after, [*events, *invalid]
        events.append(OutputEvent(value))
        return end, events

    def _invalid(
        self, end: TurnEnd, text: str, errors: tuple[str, ...]
    ) -> tuple[TurnEnd, list[ChatEvent]]:
        used = self.retries - self.retries_left
        tries = f"after {used} correction{'s' if used != 1 else ''}" if used else "at once"
        # A type without a name of its own (a schema given as fields) is "the output type".
        named = "" if self.type.name == "output" else f" {self.type.name}"
        message = (
            f"The model's answer did not match the output type{named} ({tries}): "
            f"{'; '.join(errors)}. Its last reply is in the history and in this error; try "
            "a larger model, a simpler schema or more output_retries."
        )
        error = ErrorEvent(message, ErrorCode.OUTPUT_INVALID, raw=text, errors=errors)
        return TurnEnd(None, end.complete, None, "error"), [error]


def _not_json(text: str) -> bool:
    """Whether ``text`` is no JSON at all (not even a broken object or array)."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        return False
    try:
        msgspec.json.decode(stripped)
    except msgspec.DecodeError:
        return True
    return False


def _correction(errors: tuple[str, ...], again: str | None = None) -> str:
    """The user message that asks for a corrected value (``again``: how a strategy
    wants it given, when not as the reply's text)."""
    how = again or "Answer again with only the corrected JSON value, and nothing else."
    return f"Your reply does not match the JSON Schema: {'; '.join(errors)}. {how}"
