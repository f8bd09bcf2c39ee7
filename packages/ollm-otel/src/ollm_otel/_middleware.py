"""``Otel``: a chat's spans and metrics, in the OpenTelemetry GenAI conventions.

One ``invoke_agent`` span per chat, a ``chat {model}`` CLIENT span per request to the
provider and an ``execute_tool {name}`` span per tool call, both children of the chat's
span; every span carries ``gen_ai.conversation.id``. Parents are given explicitly, from
the order of the chat's own events, never taken from whichever task is current: tool
calls run in parallel tasks (on asyncio or trio) and still land under their chat.

The request's span rides along with the request: its W3C ``traceparent`` is put in the
``ProviderRequest``'s ``headers``, which HTTP providers send, so a server that traces
(vLLM, SGLang) joins the trace.

Message content is recorded only when asked for
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``), taken from the history
as it is kept, each attribute capped. What is recorded goes through the chat's
``redact`` first (``ollm.kit.redaction``), whichever of the two runs outside the
other: the system prompt and a request's messages are read before an inner ``redact``
has seen the request.

Internal: the public names are re-exported by ``ollm_otel``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec
from opentelemetry import metrics, trace
from opentelemetry.propagate import inject
from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

from ollm import MiddlewareContext, ToolCall, ToolResult
from ollm.errors import ErrorCode
from ollm.kit import redaction
from ollm.types import (
    ErrorEvent,
    FinishEvent,
    Message,
    NoticeEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCallDeltaEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    TurnCompleteEvent,
    Usage,
)
from ollm_otel import _attributes as attribute
from ollm_otel import _names as n
from ollm_otel._content import capped, capped_text, capped_value, message_json, system_json
from ollm_otel._version import __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider

__all__ = ["CAPTURE_CONTENT_ENV", "CONTENT_LIMIT", "Otel"]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The variable that, set to ``true``, has messages recorded on the spans."""

CONTENT_LIMIT = 16384
"""Characters an attribute of content holds at most, unless ``Otel`` is told otherwise."""
MIN_CONTENT_LIMIT = 64

# Events that a reply streams: any other event says the reply has ended.
_CHUNKS = (TextEvent, ThinkingEvent, ToolCallStartEvent, ToolCallDeltaEvent)


class _Request:
    """One request's span, open until the turn's end says how it went."""

    __slots__ = ("attributes", "first_chunk", "span", "start", "stream_end", "stream_end_ns")

    def __init__(self, span: Span, attributes: dict[str, Any]) -> None:
        self.span = span
        self.attributes = attributes
        self.start = time.perf_counter()
        self.first_chunk: float | None = None
        self.stream_end: float | None = None
        self.stream_end_ns: int | None = None


class _Tool:
    """One tool call's span, open until its result enters the history."""

    __slots__ = ("end_ns", "is_error", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.end_ns: int | None = None
        self.is_error = False


class _Chat:
    """What ``Otel`` keeps about one chat (in ``ctx.state["otel"]``)."""

    __slots__ = ("agent", "error", "mcp_prefixes", "request", "server", "tools")

    def __init__(self, agent: Span, server: dict[str, Any], mcp_prefixes: tuple[str, ...]) -> None:
        self.agent = agent
        self.server = server
        self.mcp_prefixes = mcp_prefixes
        self.request: _Request | None = None
        self.tools: dict[str, _Tool] = {}
        self.error: str | None = None


class Otel:
    """A middleware that records each chat as OpenTelemetry GenAI spans and metrics.

    ``tracer_provider`` and ``meter_provider`` default to the global ones (those an
    application set up, or ``ollm_otel.configure``'s). ``capture_content`` records the
    messages, tool arguments and results (by default when
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``), each attribute cut to
    ``content_limit`` characters. ``agent_name`` becomes ``gen_ai.agent.name`` (and the
    ``invoke_agent`` span's name) when given.
    """

    name = "otel"

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | None = None,
        content_limit: int = CONTENT_LIMIT,
        agent_name: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if not (isinstance(content_limit, int) and content_limit >= MIN_CONTENT_LIMIT):
            raise ValueError(
                f"content_limit must be a number of characters of at least "
                f"{MIN_CONTENT_LIMIT}, not {content_limit!r}"
            )
        env = os.environ if environ is None else environ
        if capture_content is None:
            capture_content = env.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"
        self.capture_content = capture_content
        self.content_limit = content_limit
        self.agent_name = agent_name
        tracers = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self._tracer = tracers.get_tracer("ollm_otel", __version__, schema_url=n.SCHEMA_URL)
        meters = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        meter = meters.get_meter("ollm_otel", __version__, schema_url=n.SCHEMA_URL)
        self._duration = meter.create_histogram(
            n.OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(n.DURATION_BUCKETS),
        )
        self._tokens = meter.create_histogram(
            n.TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(n.TOKEN_BUCKETS),
        )
        self._first_chunk = meter.create_histogram(
            n.TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time to receive the first chunk of a streamed response.",
            explicit_bucket_boundaries_advisory=list(n.FIRST_CHUNK_BUCKETS),
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Otel:
        """The middleware ``--middleware otel`` builds: on the global providers when an
        application set them up, else on the SDK set up from the ``OTEL_*`` variables
        (``ollm_otel.configure``)."""
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            from ollm_otel._export import configure

            configure(environ)
        return cls(environ=environ)

    # -- the chat --------------------------------------------------------------------

    def _chat(self, ctx: MiddlewareContext) -> _Chat:
        chat: _Chat | None = ctx.state.get("otel")
        if chat is None:
            attributes: dict[str, Any] = {
                n.OPERATION_NAME: n.INVOKE_AGENT,
                n.CONVERSATION_ID: ctx.conversation_id,
            }
            if ctx.provider:  # unknown when the chat failed before choosing one
                attributes[n.PROVIDER_NAME] = attribute.provider(ctx.provider)
            if ctx.model:
                attributes[n.REQUEST_MODEL] = ctx.model
            name = n.INVOKE_AGENT
            if self.agent_name:
                attributes[n.AGENT_NAME] = self.agent_name
                name = f"{name} {self.agent_name}"
            # The caller's current span, if any, is the parent: the chat joins its trace.
            agent = self._tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
            chat = ctx.state["otel"] = _Chat(
                agent, attribute.server(ctx), attribute.mcp_prefixes(ctx)
            )
        return chat

    async def on_request(
        self, ctx: MiddlewareContext, request: ProviderRequest
    ) -> ProviderRequest | None:
        """A ``chat {model}`` span for the request, its ``traceparent`` in the headers."""
        chat = self._chat(ctx)
        self._end_request(chat, ctx)  # one the token limit kept from being sent
        attributes: dict[str, Any] = {
            n.OPERATION_NAME: n.CHAT,
            n.PROVIDER_NAME: attribute.provider(ctx.provider),
            n.REQUEST_MODEL: request.model,
            **chat.server,
        }
        metric_attributes = dict(attributes)
        attributes[n.CONVERSATION_ID] = ctx.conversation_id
        attributes.update(attribute.options(request))
        if self.capture_content:
            attributes.update(self._input(ctx, request))
        span = self._tracer.start_span(
            f"{n.CHAT} {request.model}",
            context=set_span_in_context(chat.agent),
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )
        chat.request = _Request(span, metric_attributes)
        carrier: dict[str, str] = {}
        inject(carrier, context=set_span_in_context(span))
        if not carrier:
            return None
        return msgspec.structs.replace(request, headers={**request.headers, **carrier})

    async def on_event(self, ctx: MiddlewareContext, event: Any) -> Any:
        """Notes the reply's first chunk and its end; ends spans as the chat reports them."""
        chat: _Chat | None = ctx.state.get("otel")
        if chat is None:
            if type(event) is not ErrorEvent:
                return event
            chat = self._chat(ctx)  # a chat that failed before its first request
        request = chat.request
        if request is not None and request.stream_end is None:
            if isinstance(event, _CHUNKS):
                if request.first_chunk is None:
                    request.first_chunk = time.perf_counter()
            elif not isinstance(event, NoticeEvent):
                _stream_ended(request)
        kind = type(event)
        if kind is TurnCompleteEvent:
            self._end_request(chat, ctx, reason=event.reason, usage=event.usage,
                              calls=event.tool_calls)  # fmt: skip
        elif kind is ToolCallResultEvent:
            self._end_tool(chat, ctx, event.call, event.error_code)
        elif kind is ErrorEvent:
            chat.error = event.code
            self._end_request(chat, ctx, error=event.code)
        return event

    async def before_tool_call(self, ctx: MiddlewareContext, call: ToolCall) -> None:
        """An ``execute_tool {name}`` span, a child of the chat's."""
        chat = self._chat(ctx)
        if chat.request is not None and chat.request.stream_end is None:
            _stream_ended(chat.request)
        previous = chat.tools.pop(call.id, None)
        if previous is not None:  # asked about, then let through: one span
            chat.tools[call.id] = previous
            return
        attributes = {
            n.OPERATION_NAME: n.EXECUTE_TOOL,
            n.TOOL_NAME: call.name,
            n.TOOL_CALL_ID: call.id,
            n.TOOL_TYPE: "function",
            n.CONVERSATION_ID: ctx.conversation_id,
        }
        if call.name.startswith(chat.mcp_prefixes):
            # A tool of an MCP server: it runs there, called with tools/call.
            attributes[n.TOOL_TYPE] = "extension"
            attributes[n.MCP_METHOD_NAME] = "tools/call"
        span = self._tracer.start_span(
            f"{n.EXECUTE_TOOL} {call.name}",
            context=set_span_in_context(chat.agent),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        chat.tools[call.id] = _Tool(span)

    async def after_tool_call(
        self, ctx: MiddlewareContext, call: ToolCall, result: ToolResult
    ) -> None:
        """Notes when the call ended (its span ends when its result is kept)."""
        chat: _Chat | None = ctx.state.get("otel")
        tool = chat.tools.get(call.id) if chat is not None else None
        if tool is not None:
            tool.end_ns = time.time_ns()
            tool.is_error = result.is_error

    async def on_finish(self, ctx: MiddlewareContext, finish: FinishEvent) -> None:
        """Ends what is still open, and the chat's span."""
        chat = self._chat(ctx)
        del ctx.state["otel"]
        failed = finish.reason == "error"
        error = (chat.error or "error") if failed else None
        self._end_request(chat, ctx, error=error or _unfinished(finish))
        for call_id in list(chat.tools):
            self._end_tool(chat, ctx, None, _unfinished(finish), call_id=call_id)
        agent = chat.agent
        agent.set_attribute(n.RESPONSE_FINISH_REASONS, [finish.reason])
        if finish.usage is not None:
            agent.set_attributes(attribute.usage(finish.usage))
        if error is not None:
            agent.set_attribute(n.ERROR_TYPE, error)
            agent.set_status(Status(StatusCode.ERROR))
        agent.end()

    # -- ending spans ----------------------------------------------------------------

    def _end_request(
        self,
        chat: _Chat,
        ctx: MiddlewareContext,
        *,
        reason: str | None = None,
        usage: Usage | None = None,
        calls: int = 0,
        error: str | None = None,
    ) -> None:
        request = chat.request
        if request is None:
            return
        chat.request = None
        span = request.span
        if request.stream_end is None:
            _stream_ended(request)
        assert request.stream_end is not None
        attributes = request.attributes
        if reason is not None:
            shown = "tool_call" if calls and reason == "stop" else reason
            span.set_attribute(n.RESPONSE_FINISH_REASONS, [shown])
            if self.capture_content:
                output = _last(ctx.conversation.messages, "assistant")
                if output is not None:
                    shaped = redaction(ctx)(message_json(output, shown))
                    span.set_attribute(n.OUTPUT_MESSAGES, capped([shaped], self.content_limit))
        if usage is not None:
            span.set_attributes(attribute.usage(usage))
            self._tokens.record(usage.prompt_tokens, {**attributes, n.TOKEN_TYPE: "input"})
            self._tokens.record(usage.completion_tokens, {**attributes, n.TOKEN_TYPE: "output"})
        if request.first_chunk is not None:
            first = request.first_chunk - request.start
            span.set_attribute(n.RESPONSE_TIME_TO_FIRST_CHUNK, first)
            self._first_chunk.record(first, attributes)
        if error is not None:
            span.set_attribute(n.ERROR_TYPE, error)
            span.set_status(Status(StatusCode.ERROR))
            attributes = {**attributes, n.ERROR_TYPE: error}
        self._duration.record(request.stream_end - request.start, attributes)
        span.end(end_time=request.stream_end_ns)

    def _end_tool(
        self,
        chat: _Chat,
        ctx: MiddlewareContext,
        call: ToolCall | None,
        error: str | None,
        *,
        call_id: str | None = None,
    ) -> None:
        key = call.id if call is not None else call_id
        tool = chat.tools.pop(key, None) if key is not None else None
        if tool is None:
            return
        span = tool.span
        if error is None and tool.is_error:
            error = ErrorCode.TOOL_FAILED
        if self.capture_content and call is not None:
            self._tool_content(span, ctx, call)
        if error is not None:
            span.set_attribute(n.ERROR_TYPE, error)
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=tool.end_ns)

    # -- content ---------------------------------------------------------------------

    def _input(self, ctx: MiddlewareContext, request: ProviderRequest) -> dict[str, str]:
        limit = self.content_limit
        redacted = redaction(ctx)
        messages = redacted([message_json(m) for m in request.messages])
        shaped = {n.INPUT_MESSAGES: capped(messages, limit)}
        if request.system_prompt:
            system = redacted(system_json(request.system_prompt))
            shaped[n.SYSTEM_INSTRUCTIONS] = capped(system, limit)
        return shaped

    def _tool_content(self, span: Span, ctx: MiddlewareContext, call: ToolCall) -> None:
        """The call's arguments and result as the history keeps them."""
        args: Any = call.args
        result: str | None = None
        for message in reversed(ctx.conversation.messages):
            if message.role == "tool" and message.tool_call_id == call.id and result is None:
                result = message.text
            elif message.role == "assistant" and any(c.id == call.id for c in message.tool_calls):
                args = next(c.args for c in message.tool_calls if c.id == call.id)
                break
        redacted = redaction(ctx)
        span.set_attribute(n.TOOL_CALL_ARGUMENTS, capped_value(redacted(args), self.content_limit))
        if result is not None:
            span.set_attribute(
                n.TOOL_CALL_RESULT, capped_text(redacted(result), self.content_limit)
            )


def _stream_ended(request: _Request) -> None:
    request.stream_end = time.perf_counter()
    request.stream_end_ns = time.time_ns()


def _unfinished(finish: FinishEvent) -> str | None:
    """The ``error.type`` of a span the chat's end left open."""
    return "cancelled" if finish.reason == "cancelled" else None


def _last(messages: tuple[Message, ...], role: str) -> Message | None:
    for message in reversed(messages):
        if message.role == role:
            return message
    return None
