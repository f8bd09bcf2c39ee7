"""How a chat's events look at a terminal, or as JSON lines."""

from __future__ import annotations

import msgspec

from ollm.cli.terminal import Terminal, for_the_command_line
from ollm.errors import ErrorCode
from ollm.types.events import (
    ChatEvent,
    CompactionEvent,
    ErrorEvent,
    FinishEvent,
    NoticeEvent,
    OutputEvent,
    PartialOutputEvent,
    TextEvent,
    ThinkingEvent,
    TokenWarningEvent,
    ToolCallDeltaEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolDecisionEvent,
    encode_event,
)
from ollm.types.messages import ToolCall
from ollm.types.text import encode_json

__all__ = ["EventRenderer"]

_MAX_SHOWN = 160


class EventRenderer:
    """Shows events as they arrive: the answer on stdout, the rest compactly on stderr.

    With ``json=True`` every event is one JSON line on stdout and nothing else is printed.
    With ``output=True`` (typed output, ``--schema``) stdout gets the value alone, as one
    JSON line, and the text the model streams is not shown.
    """

    def __init__(
        self,
        terminal: Terminal,
        *,
        json: bool = False,
        show_thinking: bool = True,
        output: bool = False,
    ):
        self.terminal = terminal
        self.json = json
        self.show_thinking = show_thinking
        self.typed = output
        self.finish: FinishEvent | None = None
        self.error: ErrorEvent | None = None
        self.output: OutputEvent | None = None

    def __call__(self, event: ChatEvent) -> None:
        if isinstance(event, FinishEvent):
            self.finish = event
        elif isinstance(event, ErrorEvent):
            self.error = event
        elif isinstance(event, OutputEvent):
            self.output = event
        if self.json:
            if isinstance(event, ErrorEvent):
                event = msgspec.structs.replace(event, message=for_the_command_line(event.message))
            self.terminal.out.write(encode_event(event).decode() + "\n")
            self.terminal.out.flush()
            return
        t = self.terminal
        if type(event) is TextEvent:
            if not self.typed:
                t.write(event.text)
        elif isinstance(event, OutputEvent):
            t.write(encode_json(event.value).decode() + "\n")
        elif isinstance(event, PartialOutputEvent):
            pass  # the value is printed whole, once
        elif isinstance(event, ThinkingEvent):
            if self.show_thinking:
                t.write_err(event.text, "dim")
        elif isinstance(event, ToolCallDeltaEvent):
            # The call as it is written; its whole line follows (ToolCallStartEvent).
            if event.name:
                t.write_err(f"{t.symbol('→', '->')} {event.name} ", "cyan")
            t.write_err(event.arguments_delta, "dim")
        elif isinstance(event, ToolCallStartEvent):
            arrow = t.symbol("→", "->")
            t.info(f"{arrow} {_call(event.call)}", "cyan")
        elif isinstance(event, ToolDecisionEvent):
            if event.decision == "deny":
                mark = t.symbol("✗", "x")
                t.info(f"{mark} {event.call.name} was not run: {_short(event.reason)}", "yellow")
        elif isinstance(event, ToolCallResultEvent):
            if event.error_code == ErrorCode.TOOL_DENIED:
                pass  # its decision said so
            elif event.is_error:
                mark = t.symbol("✗", "x")
                t.info(f"{mark} {_short(event.result)}", "red")
            else:
                mark = t.symbol("←", "<-")
                t.info(f"{mark} {_short(event.result)}", "dim")
        elif isinstance(event, NoticeEvent):
            t.info(f"{t.symbol('·', '*')} {event.message}", "dim")
        elif isinstance(event, CompactionEvent):
            t.info(
                f"{t.symbol('·', '*')} compacted the request ({event.strategy}): "
                f"{event.removed} message(s) left out or shortened, about "
                f"{event.tokens_before:,} -> {event.tokens_after:,} tokens (the log keeps "
                "everything)",
                "dim",
            )
        elif isinstance(event, TokenWarningEvent):
            t.warn(
                f"this request uses about {event.estimated_tokens:,} of the "
                f"{event.limit:,} tokens the context window allows ({event.ratio:.0%}). "
                "Start a new conversation or raise --context-window soon."
            )
        elif isinstance(event, ErrorEvent):
            t.error(event.message, event.code)
        elif isinstance(event, FinishEvent):
            t.end_line()
            if event.reason == "length":
                t.info("(the reply reached its length limit; raise --max-tokens for more)", "dim")
            elif event.reason == "max_turns":
                t.info("(stopped at the turn limit; raise --max-turns to let it go on)", "dim")
            elif event.reason == "cancelled":
                t.info("(cancelled)", "dim")


def _call(call: ToolCall) -> str:
    args = ", ".join(f"{key}={encode_json(value).decode()}" for key, value in call.args.items())
    return _short(f"{call.name}({args})")


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_SHOWN else flat[: _MAX_SHOWN - 3] + "..."
