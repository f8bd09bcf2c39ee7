"""A chat's typed output (``chat(..., output=T)``): how each request asks for it, what
its stream shows of it, and what the final reply gives.

``OutputStep`` is all the chat loop knows of typed output: ``prepare`` puts the schema
in each request (through the output strategy in use), ``reader`` reads the value while
a turn's text streams (the loop shows a ``PartialOutputEvent`` when it grew), and
``judge`` decides, from the final reply, between the value
(``OutputEvent``), a correction turn (through the same feedback path as ReAct's), and
``OUTPUT_INVALID``. A server that ignored the native constraint (the reply is not JSON
at all) switches its model to the prompted mode for the client's lifetime, without
spending a retry.

Internal: not part of ollm's public API (a step of ``ollm.ChatClient.chat``); its layout
may change in any release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from ollm.errors import ErrorCode
from ollm.output.native import NativeOutput
from ollm.output.partial import PartialJSON
from ollm.output.schema import OutputMismatch, OutputType
from ollm.runtime.steps import TurnEnd
from ollm.types.events import (
    ChatEvent,
    ErrorEvent,
    NoticeEvent,
    OutputEvent,
)
from ollm.types.output import OutputStrategy
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
        self._chosen: OutputStrategy = (
            NativeOutput()
            if strategy in ("auto", "native")
            else context.registries.output_strategies.create(strategy)
        )
        self._auto = strategy == "auto"
        self._prompted: OutputStrategy | None = None
        self.current = self._chosen

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

    # -- the requests ------------------------------------------------------------------

    def prepare(self, request: ProviderRequest, tool_strategy: object) -> ProviderRequest:
        """``request`` asking for the output, the way this turn asks for it."""
        self.current = self._strategy(tool_strategy)
        return self.current.prepare(request, self.type.schema)

    def _strategy(self, tool_strategy: object) -> OutputStrategy:
        # A tool strategy that speaks its own text protocol (ReAct) cannot take a JSON
        # constraint; nor can a model whose server ignored it.
        if self._auto and (
            self.key in self.context.format_ignored
            or getattr(tool_strategy, "text_protocol", False)
        ):
            return self._prompted_strategy()
        return self._chosen

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
        ignored = self._auto and self.current.constrains and _not_json(text)
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
                feedback = _correction(exc.errors)
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


def _correction(errors: tuple[str, ...]) -> str:
    """The user message that asks for a corrected value."""
    return (
        f"Your reply does not match the JSON Schema: {'; '.join(errors)}. Answer again "
        "with only the corrected JSON value, and nothing else."
    )
