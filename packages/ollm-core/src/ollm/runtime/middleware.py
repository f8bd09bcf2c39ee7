"""The middleware of one chat: its layers in order, and how each method is called.

Each method call is bounded: a plain method runs in a daemon thread (one stuck for ever
cannot keep the process from exiting once the chat gave up on it), every call runs
under the chat's abort signal and the chat's ``middleware_timeout``, and whatever goes
wrong (an exception, the timeout, an answer of the wrong kind) becomes one
``MiddlewareError`` naming the middleware and its method. The chain checks what each
method returns before passing it on, so a middleware can change values but never the
shape of the history (a call's id, a message's role).

The order is the onion's: the first middleware named is the outermost. Requests and
``before_tool_call`` go from the first to the last; events, messages, ``after_tool_call``
and ``on_finish`` from the last to the first.

Internal: not part of ollm's public API (a step of ``ollm.ChatClient.chat``); its layout
may change in any release.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio
import msgspec

from ollm.errors import ErrorCode, MiddlewareError
from ollm.runtime.daemon import run_in_daemon_thread
from ollm.tools.result import ToolResult
from ollm.types.abort import AbortSignal
from ollm.types.events import CHAT_EVENT_TYPES, ChatEvent, FinishEvent
from ollm.types.messages import Message, ToolCall
from ollm.types.middleware import (
    MIDDLEWARE_METHODS,
    Ask,
    Deny,
    MiddlewareContext,
    check_middleware,
)
from ollm.types.request import ProviderRequest

__all__ = [
    "HOOKS",
    "Layer",
    "MiddlewareChain",
    "check_middleware",
    "is_async",
    "layer_of",
    "redaction",
]

log = logging.getLogger(__name__)

HOOKS = MIDDLEWARE_METHODS

Verdict = ToolCall | Deny | Ask


class Layer:
    """One middleware: its name and the methods it has (with whether each is async)."""

    __slots__ = ("methods", "name", "obj")

    def __init__(self, name: str, obj: object) -> None:
        self.name = name
        self.obj = obj
        self.methods: dict[str, tuple[Callable[..., Any], bool]] = {}
        for hook in HOOKS:
            method = getattr(obj, hook, None)
            if callable(method):
                self.methods[hook] = (method, is_async(method))

    def __repr__(self) -> str:
        return f"<Layer {self.name} {sorted(self.methods)}>"


def is_async(method: Callable[..., Any]) -> bool:
    """Whether calling ``method`` gives an awaitable (an ``async def``, a partial of one,
    an object with an ``async __call__``)."""
    target = method
    while isinstance(target, functools.partial):
        target = target.func
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def layer_of(item: object, name: str | None = None) -> Layer:
    """The layer of a middleware object (named ``name``, else by its ``name`` attribute,
    else by its class)."""
    if name is None:
        own = getattr(item, "name", None)
        name = own if isinstance(own, str) and own else type(item).__name__
    return Layer(name, item)


class MiddlewareChain:
    """The layers of one chat, called in the onion's order, each call contained."""

    __slots__ = (
        "abort",
        "calls",
        "context",
        "events",
        "finishes",
        "layers",
        "messages",
        "requests",
        "results",
        "timeout",
    )

    def __init__(
        self,
        layers: Sequence[Layer],
        context: MiddlewareContext,
        *,
        timeout: float | None,
        abort: AbortSignal,
    ) -> None:
        self.layers = tuple(layers)
        self.context = context
        context.middleware = tuple(layer.obj for layer in self.layers)
        self.timeout = timeout
        self.abort = abort

        def having(hook: str) -> tuple[Layer, ...]:
            return tuple(layer for layer in self.layers if hook in layer.methods)

        self.requests = having("on_request")
        # The layers around a tool call: those with a method before it or after it.
        self.calls = tuple(
            layer
            for layer in self.layers
            if "before_tool_call" in layer.methods or "after_tool_call" in layer.methods
        )
        self.results = having("after_tool_call")
        # Inner to outer: the last named sees an event first.
        self.events = tuple(reversed(having("on_event")))
        self.messages = tuple(reversed(having("on_message")))
        self.finishes = tuple(reversed(having("on_finish")))

    def __bool__(self) -> bool:
        return bool(self.layers)

    # -- one call --------------------------------------------------------------------

    async def call(self, layer: Layer, hook: str, *args: Any) -> Any:
        """``layer``'s ``hook`` with the chat's context and ``args``, contained."""
        method, asynchronous = layer.methods[hook]
        result: Any = None
        with self.abort.guard() as aborted:
            with anyio.move_on_after(self.timeout) as timer:
                try:
                    if asynchronous:
                        result = await method(self.context, *args)
                    else:
                        result = await run_in_daemon_thread(
                            functools.partial(method, self.context, *args)
                        )
                except (Exception, SystemExit) as exc:
                    log.debug("middleware %r failed in %s", layer.name, hook, exc_info=exc)
                    raise MiddlewareError(
                        f"Middleware {layer.name!r} failed in {hook}: "
                        f"{self._scrubbed(_describe(exc))}. {_STOPPED}"
                    ) from None
        if aborted.cancelled_caught:
            # The chat was aborted while the method ran: a failure of its own code, which
            # the run ends as ``cancelled`` (not as the middleware's failure).
            raise MiddlewareError(
                f"The chat was cancelled while middleware {layer.name!r} ran {hook}.",
                code=ErrorCode.CANCELLED,
            )
        if timer.cancelled_caught:
            raise MiddlewareError(
                f"Middleware {layer.name!r} did not answer within {self.timeout:g} seconds "
                f"in {hook}. {_STOPPED} A slow middleware may be given longer "
                "(middleware_timeout=...)."
            )
        return result

    def _scrubbed(self, text: str) -> str:
        """``text`` (a failure's own words, which may quote a key) as the chat's
        redaction makes it: the chain's errors skip the middleware's ``on_event``, so they
        are cleaned here, failing closed."""
        try:
            cleaned = redaction(self.context)(text)
        except Exception:
            return "(its message was withheld: it could not be redacted)"
        return cleaned if isinstance(cleaned, str) else text

    def call_now(self, layer: Layer, hook: str, *args: Any) -> Any:
        """A plain (not async) method, called at once in this thread (``None`` for an
        async one, which cannot be); failures are logged and give ``None``."""
        method, asynchronous = layer.methods[hook]
        if asynchronous:
            log.debug("middleware %r: async %s skipped for a reply cut short", layer.name, hook)
            return None
        try:
            return method(self.context, *args)
        except Exception:
            log.warning("middleware %r failed in %s", layer.name, hook, exc_info=True)
            return None

    # -- the hooks -------------------------------------------------------------------

    async def request(self, request: ProviderRequest) -> ProviderRequest:
        """The request to send, as the middleware (first to last) make it."""
        for layer in self.requests:
            result = await self.call(layer, "on_request", request)
            if result is None:
                continue
            if not isinstance(result, ProviderRequest):
                raise _wrong(layer, "on_request", result, "a ProviderRequest (or None)")
            request = result
        if request.abort is not self.abort:
            # The chat's abort signal stays the request's, whatever a middleware built.
            request = msgspec.structs.replace(request, abort=self.abort)
        return request

    async def event(self, event: ChatEvent) -> list[ChatEvent]:
        """What the caller gets in place of ``event`` (last middleware to first)."""
        items: list[ChatEvent] = [event]
        for layer in self.events:
            passed: list[ChatEvent] = []
            for item in items:
                result = await self.call(layer, "on_event", item)
                if result is None:
                    continue
                if isinstance(result, CHAT_EVENT_TYPES):
                    passed.append(result)
                elif isinstance(result, (list, tuple)) and all(
                    isinstance(e, CHAT_EVENT_TYPES) for e in result
                ):
                    passed.extend(result)
                else:
                    raise _wrong(layer, "on_event", result, "a chat event, a list of them, or None")
            items = passed
            if not items:
                break
        return items

    async def before(self, call: ToolCall, start: int = 0) -> tuple[Verdict, int]:
        """The call to run, or a ``Deny`` or ``Ask``, from the layers from ``start`` on;
        and how many layers let it through (those whose ``after_tool_call`` then sees
        its result)."""
        layers = self.calls
        for index in range(start, len(layers)):
            layer = layers[index]
            if "before_tool_call" not in layer.methods:
                continue
            result = await self.call(layer, "before_tool_call", call)
            if result is None:
                continue
            if isinstance(result, (Deny, Ask)):
                return result, index
            if not isinstance(result, ToolCall):
                raise _wrong(layer, "before_tool_call", result, "a ToolCall, Deny, Ask or None")
            if result.id != call.id or result.name != call.name:
                raise _wrong(
                    layer,
                    "before_tool_call",
                    _Said(f"a call of another id or tool ({result.name!r}, {result.id!r})"),
                    f"the call {call.name!r} ({call.id!r}) with its arguments changed",
                )
            if not isinstance(result.args, dict):
                raise _wrong(layer, "before_tool_call", result.args, "arguments as a dict")
            call = result
        return call, len(layers)

    async def after(self, call: ToolCall, result: ToolResult, depth: int) -> ToolResult:
        """The result the model reads, from the ``depth`` layers the call went through
        (the innermost first)."""
        for layer in reversed(self.calls[:depth]):
            if "after_tool_call" not in layer.methods:
                continue
            changed = await self.call(layer, "after_tool_call", call, result)
            if changed is None:
                continue
            if not isinstance(changed, ToolResult):
                raise _wrong(layer, "after_tool_call", changed, "an ollm.ToolResult (or None)")
            result = changed
        return result

    async def message(self, message: Message) -> Message:
        """The message the history keeps (last middleware to first)."""
        for layer in self.messages:
            changed = await self.call(layer, "on_message", message)
            message = _checked_message(layer, message, changed)
        return message

    def message_now(self, message: Message) -> Message:
        """``message`` through the plain ``on_message`` methods, at once (for a reply cut
        short while nothing can be awaited); a failure leaves it as it is."""
        for layer in self.messages:
            changed = self.call_now(layer, "on_message", message)
            try:
                message = _checked_message(layer, message, changed)
            except MiddlewareError as exc:
                log.warning("%s", exc.message)
        return message

    async def finish(self, finish: FinishEvent) -> None:
        """Tell every middleware that has ``on_finish`` that the chat ended."""
        for layer in self.finishes:
            await self.call(layer, "on_finish", finish)


class _Said:
    """What a middleware returned, described (rather than its type named)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_STOPPED = "The chat was stopped; its history is intact. Fix the middleware, or leave it out."


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _wrong(layer: Layer, hook: str, value: object, expected: str) -> MiddlewareError:
    what = value.text if isinstance(value, _Said) else type(value).__name__
    return MiddlewareError(
        f"Middleware {layer.name!r} returned {what} from {hook}; it must return {expected}. "
        f"{_STOPPED}"
    )


def _checked_message(layer: Layer, message: Message, changed: object) -> Message:
    if changed is None:
        return message
    if not isinstance(changed, Message):
        raise _wrong(layer, "on_message", changed, "an ollm.Message (or None)")
    if (
        changed.role != message.role
        or changed.tool_call_id != message.tool_call_id
        or [c.id for c in changed.tool_calls] != [c.id for c in message.tool_calls]
    ):
        raise _wrong(
            layer,
            "on_message",
            _Said("a message of another role or other calls"),
            "the message with its content changed (the same role, calls and call id)",
        )
    return changed


T = TypeVar("T")


def redaction(ctx: MiddlewareContext) -> Callable[[T], T]:
    """What the chat's redacting middleware (``Redact``, or any with a ``scrub(value)``
    method) make of a value (a string, or structs, lists and dicts of them), whatever
    their place among the chat's middleware: for a middleware that records content
    (traces, an audit file) to record it redacted in either order. The value unchanged
    when the chat has none."""
    scrubbers = [
        scrub for item in ctx.middleware if callable(scrub := getattr(item, "scrub", None))
    ]

    def redacted(value: T) -> T:
        for scrub in scrubbers:
            value = scrub(value)
        return value

    return redacted
