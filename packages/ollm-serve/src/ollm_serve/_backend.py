"""One served request run through ollm's runtime: what both wires (OpenAI's, Ollama's)
share.

The client owns its tools: a tool call the model makes goes back to the client as a
native call, never runs here. The runtime is given each tool as a schema whose function
does nothing, and the chat stops at the end of the first turn that called tools (before
a second request), so the calls it reports (native ones, or those ReAct and text-call
recovery read out of a model's text) are the reply.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

import ollm
from ollm.errors import ErrorCode, OllmError

log = logging.getLogger(__name__)

__all__ = ["Backend", "ChatJob", "Delta", "Done", "Failed", "Route"]


@dataclass(frozen=True)
class Route:
    """Where a request's model goes: a configured provider and the model's name there."""

    provider: str | None
    model: str | None


@dataclass
class ChatJob:
    """A chat request, as either wire gives it."""

    model: str
    messages: list[ollm.Message]
    system: str | None = None
    tools: tuple[ollm.ToolSchema, ...] = ()
    tool_choice: str = "auto"
    options: ollm.GenerationOptions = field(default_factory=ollm.GenerationOptions)
    # A JSON Schema the answer must match (response_format), validated with retries.
    schema: dict[str, Any] | None = None
    think: bool | str | None = None


@dataclass(frozen=True)
class Delta:
    """Text or reasoning to pass on as it comes."""

    text: str = ""
    thinking: str = ""


@dataclass(frozen=True)
class Done:
    """The reply's end: its tool calls (if it called tools), why it ended, its usage, and
    the whole text when the answer was held back for validation."""

    reason: str
    tool_calls: tuple[ollm.ToolCall, ...] = ()
    usage: ollm.Usage | None = None
    content: str | None = None


@dataclass(frozen=True)
class Failed:
    """The chat failed; ``status`` is the HTTP status the error maps to."""

    message: str
    code: str
    status: int
    retry_after: float | None = None


# ollm's error codes as HTTP statuses (the rest are 502: the backend failed).
_STATUS = {
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.INVALID_HISTORY: 400,
    ErrorCode.TOKEN_LIMIT: 400,
    ErrorCode.CONTEXT_EXCEEDED: 400,
    ErrorCode.TOOLS_UNSUPPORTED: 400,
    ErrorCode.UNSUPPORTED: 400,
    ErrorCode.CONTENT_BLOCKED: 400,
    ErrorCode.OUTPUT_INVALID: 422,
    ErrorCode.MODEL_NOT_FOUND: 404,
    ErrorCode.PROVIDER_NOT_FOUND: 404,
    ErrorCode.AUTH_FAILED: 502,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.TIMEOUT: 504,
    ErrorCode.CANCELLED: 499,
    ErrorCode.CONNECTION_FAILED: 502,
}


def status_of(code: str) -> int:
    """The HTTP status for an ollm error code."""
    return _STATUS.get(code, 502)


async def _never_runs(**_: Any) -> str:
    # The runtime gets the client's tools as schemas: the chat stops before any result
    # is read, so this never reaches a model.
    return ""


class Backend:
    """The configured providers, and chats run on them."""

    def __init__(
        self,
        providers: Sequence[str] = (),
        *,
        model: str | None = None,
        registries: ollm.Registries | None = None,
        tool_strategy: str = "auto",
        middleware: Sequence[str] = (),
        context_window: int | str | None = None,
        log: bool = False,
    ) -> None:
        self.providers = tuple(providers)
        self.model = model
        self.log = log
        self._log_lock = threading.Lock()  # one write at a time, from worker threads
        self.client = ollm.ChatClient(
            registries,
            tool_strategy=tool_strategy,
            middleware=tuple(middleware),
            context_window=context_window,
            # One request of the client is at most a reply, and its corrections.
            max_turns=4,
        )

    @property
    def registries(self) -> ollm.Registries:
        return self.client.registries

    def route(self, model: str) -> Route:
        """``PROVIDER:MODEL`` goes to that configured provider (the longest that matches,
        so ``pool:home:qwen3`` is ``pool:home``'s ``qwen3``); any other name goes to the
        first configured provider (the default one when none is), whole: Ollama's
        ``llama3.2:1b`` stays itself."""
        for name in sorted(self.providers, key=len, reverse=True):
            if model.startswith(name + ":") and len(model) > len(name) + 1:
                return Route(name, model[len(name) + 1 :])
            if model == name:
                return Route(name, self.model)
        first = self.providers[0] if self.providers else None
        return Route(first, model or self.model)

    def provider(self, route: Route) -> ollm.ProviderAdapter:
        """The provider object of ``route`` (built once, then shared)."""
        return self.registries.providers.get(route.provider)

    def chat(self, job: ChatJob, abort: ollm.AbortSignal) -> AsyncGenerator[object, None]:
        """Run ``job``: ``Delta``s as the reply streams, then one ``Done`` or ``Failed``
        (and, with ``log``, the chat into the conversation log once it has ended)."""
        route = self.route(job.model)
        conversation = ollm.Conversation(job.messages)
        events = self._chat(job, abort, route, conversation)
        return self._logged(events, job, route, conversation) if self.log else events

    async def _logged(
        self,
        events: AsyncGenerator[object, None],
        job: ChatJob,
        route: Route,
        conversation: ollm.Conversation,
    ) -> AsyncGenerator[object, None]:
        started = time.perf_counter()
        ended: object = None
        try:
            async for event in events:
                if isinstance(event, (Done, Failed)):
                    ended = event
                yield event
        finally:
            # Shielded: a client that went away leaves its chat logged all the same. The
            # chat is closed first, so its reply is in the conversation (cut short when
            # the client runs the calls: the server did not).
            with anyio.CancelScope(shield=True):
                await events.aclose()
                duration_ms = (time.perf_counter() - started) * 1000.0
                await anyio.to_thread.run_sync(
                    self._record, conversation, job, route, ended, duration_ms
                )

    def _record(
        self,
        conversation: ollm.Conversation,
        job: ChatJob,
        route: Route,
        ended: object,
        duration_ms: float,
    ) -> None:
        """One served chat as a conversation of its own in the log (a client sends the
        whole history each time); a log that cannot be written is a warning, never a
        failed request."""
        from ollm.logs import LogStore, LogsUnavailableError

        done = ended if isinstance(ended, Done) else None
        failed = ended if isinstance(ended, Failed) else None
        provider = route.provider or self.registries.providers.default_name
        try:
            with self._log_lock, LogStore() as store:
                store.log_exchange(
                    None,
                    conversation.messages,
                    provider=provider,
                    model=route.model,
                    system=job.system,
                    finish_reason=done.reason if done else ("error" if failed else "cancelled"),
                    usage=done.usage if done else None,
                    duration_ms=duration_ms,
                    error_code=failed.code if failed else None,
                    error_message=failed.message if failed else None,
                )
        except LogsUnavailableError as exc:
            log.warning("the chat was served but not logged: %s", exc.message)

    async def _chat(
        self,
        job: ChatJob,
        abort: ollm.AbortSignal,
        route: Route,
        conversation: ollm.Conversation,
    ) -> AsyncGenerator[object, None]:
        calls: list[ollm.ToolCall] = []
        output: list[Any] = []
        usage: ollm.Usage | None = None
        try:
            tools = [ollm.Tool.from_schema(schema, _never_runs) for schema in job.tools]
            stream = self.client.chat(
                conversation=conversation,
                abort=abort,
                provider=route.provider,
                model=route.model,
                system=job.system,
                tools=tools,
                tool_choice=job.tool_choice,
                options=job.options,
                output=job.schema,
                think=job.think,
            )
        except (OllmError, ValueError, TypeError) as exc:
            message = exc.message if isinstance(exc, OllmError) else str(exc)
            code = exc.code if isinstance(exc, OllmError) else ErrorCode.INVALID_REQUEST
            yield Failed(message, code, status_of(code))
            return
        async with stream:
            async for event in stream:
                if isinstance(event, ollm.TextEvent):
                    if job.schema is None:
                        yield Delta(text=event.text)
                elif isinstance(event, ollm.ThinkingEvent):
                    yield Delta(thinking=event.text)
                elif isinstance(event, ollm.ToolCallStartEvent):
                    calls.append(event.call)
                elif isinstance(event, ollm.OutputEvent):
                    output.append(event.value)
                elif isinstance(event, ollm.TurnCompleteEvent):
                    usage = _added(usage, event.usage)
                    if calls:
                        # The client runs its tools: end here, before a second request.
                        stream.abort("the client runs its tools")
                        yield Done("tool_calls", tuple(calls), usage)
                        return
                elif isinstance(event, ollm.ErrorEvent):
                    yield Failed(
                        event.message, event.code, status_of(event.code), event.retry_after
                    )
                    return
                elif isinstance(event, ollm.FinishEvent):
                    content = None
                    if job.schema is not None and output:
                        content = json.dumps(output[-1], ensure_ascii=False)
                    yield Done(event.reason, (), event.usage or usage, content)
                    return


def _added(total: ollm.Usage | None, more: ollm.Usage | None) -> ollm.Usage | None:
    if more is None:
        return total
    if total is None:
        return more
    return ollm.Usage(
        prompt_tokens=total.prompt_tokens + more.prompt_tokens,
        completion_tokens=total.completion_tokens + more.completion_tokens,
        total_tokens=total.total_tokens + more.total_tokens,
    )
