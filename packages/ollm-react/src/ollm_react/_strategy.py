"""``ReActStrategy``: tool calling for models without native tools, as ollm's runtime sees it.

The runtime hands it the native request (tools, canonical history) and gets native
events back: the strategy renders the request as a ReAct text conversation, streams
the model's text through the scanner (thinking for Thoughts, text for the final
answer, a ``ToolCallEvent`` as soon as an action's input closes, and then it stops the
generation), and reviews each reply with the batch parser. One object serves one chat,
so it keeps that chat's count of malformed replies and the calls already made.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import msgspec

from ollm.errors import ErrorCode
from ollm.types import (
    ErrorEvent,
    FinishEvent,
    Message,
    ProviderAdapter,
    ProviderEvent,
    ProviderRequest,
    ReplyReview,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    ToolSchema,
)
from ollm_react._instructions import build_instructions, feedback, wrap_up_prompt
from ollm_react._memory import CallMemory
from ollm_react._parser import (
    FormatProblem,
    ParsedAction,
    ParsedAnswer,
    ParsedReply,
    has_protocol_text,
    parse_reply,
    without_protocol_text,
)
from ollm_react._render import dump_arguments, render_messages
from ollm_react._scanner import Output, StreamScanner

__all__ = ["OBSERVATION_STOP", "ReActStrategy"]

log = logging.getLogger(__name__)

OBSERVATION_STOP = "\nObservation:"
"""The stop sequence every ReAct request carries (the model must not invent results)."""

_REPEAT_LIMIT = 2


class ReActStrategy:
    """Tools described in the system prompt; Thought / Action / Final Answer parsed from text.

    - ``worked_example``: add one worked example with a made-up tool to the
      instructions (very small models copy placeholders literally without one);
    - ``max_format_errors``: malformed replies in a row before the chat ends with a
      ``FORMAT_ERROR`` (each earlier one gets an Observation saying what to fix);
    - ``name``: the registry name it answers to (``react``, ``react-example``).
    """

    # Its own protocol is text: typed output is asked for in the prompt (``prompted``),
    # and its Final Answer is the value.
    text_protocol = True

    def __init__(
        self,
        *,
        worked_example: bool = False,
        max_format_errors: int = 3,
        name: str = "react",
    ) -> None:
        if not isinstance(max_format_errors, int) or max_format_errors < 1:
            raise ValueError(
                f"max_format_errors must be a positive integer, not {max_format_errors!r}"
            )
        self._name = name
        self.worked_example = worked_example
        self.max_format_errors = max_format_errors
        # The chat's state.
        self._tools: tuple[ToolSchema, ...] = ()
        self._format_errors = 0
        self._thought_only = False  # the last reply only thought
        self._calls = CallMemory()
        self._wrap_up_next = False
        # The last system prompt: its tools, what else it was built from, and the text.
        self._system: (
            tuple[tuple[ToolSchema, ...], tuple[str | None, str, bool], str | None] | None
        ) = None
        # The current turn's state.
        self._chunks: list[str] = []
        self._streamed = False
        self._wrapping_up = False
        self._call_id = "react_1"
        self._parsed: tuple[str, ParsedReply] | None = None

    @property
    def name(self) -> str:
        """The registry name."""
        return self._name

    # -- the request -------------------------------------------------------------------

    def prepare(self, request: ProviderRequest) -> ProviderRequest:
        """The request as the provider receives it (the runtime counts its tokens)."""
        return self.text_request(request)

    def text_request(self, request: ProviderRequest) -> ProviderRequest:
        """The native request rendered as a ReAct text request for the same provider."""
        if request.tools:
            self._tools = request.tools
        tools = request.tools or self._tools
        options = request.options
        stop = tuple(options.stop or ())
        if OBSERVATION_STOP not in stop:
            options = msgspec.structs.replace(options, stop=(*stop, OBSERVATION_STOP))
        return msgspec.structs.replace(
            request,
            messages=render_messages(request.messages),
            system_prompt=self._system_prompt(tools, request.system_prompt, request.tool_choice),
            tools=(),
            tool_choice="auto",
            options=options,
            # A JSON constraint would forbid the ReAct text itself.
            response_format=None,
        )

    def _system_prompt(
        self, tools: tuple[ToolSchema, ...], system: str | None, tool_choice: str
    ) -> str | None:
        settings = (system, tool_choice, self.worked_example)
        cached = self._system
        # The runtime passes the same tools tuple every turn: build the prompt once.
        if cached is not None and cached[0] is tools and cached[1] == settings:
            return cached[2]
        prompt = system
        if tools:
            instructions = build_instructions(
                tools, worked_example=self.worked_example, tool_choice=tool_choice
            )
            prompt = f"{instructions}\n\n{system}" if system else instructions
        self._system = (tools, settings, prompt)
        return prompt

    # -- the stream --------------------------------------------------------------------

    def stream(
        self, provider: ProviderAdapter, request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        """Send the request as ReAct text; yield thinking, answer text and tool calls."""
        self._begin_turn(request)
        return self._stream(provider, self.text_request(request))

    def _begin_turn(self, request: ProviderRequest) -> None:
        self._chunks = []
        self._parsed = None
        self._streamed = True
        self._wrapping_up, self._wrap_up_next = self._wrap_up_next, False
        # Unique in the conversation: one more than the calls its history holds.
        made = sum(len(m.tool_calls) for m in request.messages if m.role == "assistant")
        self._call_id = f"react_{made + 1}"
        self._calls.learn(request.messages)

    async def _stream(
        self, provider: ProviderAdapter, request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        scanner = StreamScanner(self._tools)
        chunks = self._chunks
        joint = _ThinkingJoint()
        inner = _Inner(provider.chat_stream(request))
        try:
            async for event in inner.events:
                kind = type(event)
                if kind is TextEvent:
                    assert isinstance(event, TextEvent)
                    chunks.append(event.text)
                    outputs = scanner.feed(event.text)
                    if outputs:
                        if len(outputs) == 1 and outputs[0][1] is event.text:
                            if outputs[0][0] == "text":
                                # Shown as it came: pass the provider's own event on.
                                yield event
                            else:
                                yield joint.text(ThinkingEvent(event.text))
                        else:
                            for shown in _events(outputs):
                                yield joint.text(shown)
                    if scanner.stop is not None:
                        # The rest cannot matter: stop the generation first (closing
                        # the stream makes the server stop), then end the reply here.
                        last = self._last_events(scanner)
                        await inner.close()
                        for last_event in last:
                            yield joint.text(last_event)
                        yield FinishEvent("stop")
                        return
                elif kind is FinishEvent:
                    for last_event in self._last_events(scanner):
                        yield joint.text(last_event)
                    yield event
                    return
                elif kind is ToolCallEvent:
                    log.debug("ignoring a native tool call in a ReAct reply: %r", event)
                else:
                    # Thinking, notices, errors, and anything else for the runtime to judge.
                    yield joint.channel(event)
                    if kind is ErrorEvent:
                        return
            for last_event in self._last_events(scanner):
                yield joint.text(last_event)
        finally:
            await inner.close()

    def _last_events(self, scanner: StreamScanner) -> list[ProviderEvent]:
        """What the end of the stream completes: held text, the answer, the call.

        The batch parser decides. An answer the scanner did not stream (no line-start
        ``Final Answer:``: an implicit one, one written mid-line, one in a JSON action)
        is shown now, as the parser reads it; protocol text never is.
        """
        events = _events(scanner.end())
        parsed = self._parse()
        if not scanner.answering:
            events = [event for event in events if type(event) is not TextEvent]
            if isinstance(parsed, ParsedAnswer):
                events.append(TextEvent(parsed.answer))
        if isinstance(parsed, ParsedAction) and not self._wrapping_up:
            # At the turn limit no tool runs: the review shows the call's thought instead.
            events.append(ToolCallEvent(ToolCall(self._call_id, parsed.tool, parsed.args)))
        return events

    def _parse(self, fallback: str = "") -> ParsedReply:
        raw = "".join(self._chunks) if self._streamed else fallback
        cached = self._parsed
        if cached is not None and cached[0] == raw:
            return cached[1]
        parsed = parse_reply(raw, self._tools)
        self._parsed = (raw, parsed)
        return parsed

    # -- the review --------------------------------------------------------------------

    def review(self, reply: Message) -> ReplyReview | None:
        """Judge the reply from the text the stream buffered (the single source of truth)."""
        parsed = self._parse(reply.text)
        self._streamed = False
        if self._wrapping_up:
            return _last_answer(parsed)
        if isinstance(parsed, ParsedAction):
            self._format_errors, self._thought_only = 0, False
            return self._action(parsed)
        if isinstance(parsed, ParsedAnswer):
            self._format_errors, self._thought_only = 0, False
            return ReplyReview(
                message=Message.assistant(parsed.answer, thinking=parsed.thought or None)
            )
        if (
            parsed.kind == "thought_only"
            and self._thought_only
            and not has_protocol_text(parsed.thought)
        ):
            # A second reply in a row that only thinks: its thought is the answer (never
            # when it still holds protocol markers: the user would see them).
            self._format_errors, self._thought_only = 0, False
            return ReplyReview(
                message=Message.assistant(parsed.thought),
                events=(TextEvent(parsed.thought),),
            )
        self._thought_only = parsed.kind == "thought_only"
        self._format_errors += 1
        message = Message.assistant(parsed.text)
        if self._format_errors >= self.max_format_errors:
            return ReplyReview(message=message, error=self._too_many(parsed))
        return ReplyReview(message=message, feedback=feedback(parsed, self._tools))

    def _action(self, parsed: ParsedAction) -> ReplyReview:
        call = ToolCall(self._call_id, parsed.tool, parsed.args)
        message = Message.assistant("", tool_calls=(call,), thinking=parsed.thought or None)
        made = self._calls.made(call)
        if made >= _REPEAT_LIMIT:
            why = (
                f"it was already called {made} times with these same arguments "
                f"({dump_arguments(parsed.args)}). Its result was: "
                f"{self._calls.shown(call)}. Use that "
                "result, call a tool with other arguments, or give your Final Answer."
            )
            return ReplyReview(message=message, results={call.id: why})
        self._calls.record(call)
        return ReplyReview(message=message)

    def _too_many(self, problem: FormatProblem) -> ErrorEvent:
        return ErrorEvent(
            f"The model's last {self._format_errors} replies were not in the ReAct format "
            f"(the last one: {problem.detail}). Try a larger model, the 'react-example' "
            "tool strategy (instructions with a worked example: tool_strategy=, or "
            "ollm chat --tool-strategy react-example), or chat without tools.",
            ErrorCode.FORMAT_ERROR,
        )

    # -- the turn limit ----------------------------------------------------------------

    def wrap_up(self, request: ProviderRequest) -> ProviderRequest | None:
        """One last request without tools, asking for the Final Answer now."""
        if request.tools:
            self._tools = request.tools
        self._wrap_up_next = True
        return msgspec.structs.replace(
            request,
            tools=(),
            messages=(*request.messages, Message.user(wrap_up_prompt())),
        )


class _ThinkingJoint:
    """Keeps the thinking of two sources apart: the provider's channel, and the reply's
    text (its ``<think>`` blocks and Thoughts). The runtime joins thinking as it comes,
    so where one source follows the other with no space between, a line break goes in
    ("server reasoning" then "a thought", not "server reasoninga thought")."""

    __slots__ = ("source", "tail")

    def __init__(self) -> None:
        self.source = ""
        self.tail = ""

    def text(self, event: ProviderEvent) -> ProviderEvent:
        return self._join(event, "text")

    def channel(self, event: ProviderEvent) -> ProviderEvent:
        return self._join(event, "channel")

    def _join(self, event: ProviderEvent, source: str) -> ProviderEvent:
        if type(event) is not ThinkingEvent:
            return event
        assert isinstance(event, ThinkingEvent)
        text = event.text
        if not text:
            return event
        if (
            self.source
            and self.source != source
            and not self.tail.isspace()
            and not text[0].isspace()
        ):
            event = ThinkingEvent("\n" + text)
        self.source = source
        self.tail = text[-1]
        return event


class _Inner:
    """The provider's stream, closed once whichever way the reply ends."""

    __slots__ = ("closed", "events")

    def __init__(self, events: AsyncIterator[ProviderEvent]) -> None:
        self.events = events
        self.closed = False

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        aclose = getattr(self.events, "aclose", None)
        if aclose is not None:
            await aclose()


def _last_answer(parsed: ParsedReply) -> ReplyReview:
    """The wrap-up reply: whatever it holds is the answer, and no tool runs."""
    if isinstance(parsed, ParsedAnswer):
        return ReplyReview(
            message=Message.assistant(parsed.answer, thinking=parsed.thought or None)
        )
    # Only the thought: a malformed reply's text without one is all protocol (markers,
    # a call written as JSON, a fence), never an answer.
    text = without_protocol_text(parsed.thought)
    if not text:
        text = "I could not finish within the turn limit."
    return ReplyReview(message=Message.assistant(text), events=(TextEvent(text),))


def _events(outputs: list[Output]) -> list[ProviderEvent]:
    return [TextEvent(text) if kind == "text" else ThinkingEvent(text) for kind, text in outputs]
