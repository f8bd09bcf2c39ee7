"""The echo provider: answers with the prompt, so ollm works end to end with no server.

``ollm chat -p echo "hello there"`` streams ``hello there`` back word by word. A prompt
that is a JSON object scripts the reply instead::

    ollm chat -p echo -t calculate \\
        '{"text": "Let me work that out.", "tool_calls": [{"name": "calculate",
          "arguments": {"expression": "2+2"}}]}'

and on the turn after the tool results it answers with them (``calculate -> 4``), so a
full tool round trip runs offline.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable
from typing import Any

import msgspec

from ollm.errors import ErrorCode
from ollm.types import (
    ErrorEvent,
    FinishReason,
    Message,
    ModelCapabilities,
    ModelInfo,
    ProviderEvent,
    ProviderRequest,
    TextPart,
    ToolCall,
    Usage,
)
from ollm_testutils.capabilities import MockModels
from ollm_testutils.mock import MockProvider, Reply

__all__ = ["EchoProvider", "count_words"]

_WORDS = re.compile(r"\s*\S+|\s+$")
_SCRIPT_KEYS = frozenset(
    ("text", "thinking", "tool_calls", "error", "hang", "delay", "first_delay", "finish")
)


class _ScriptCall(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    arguments: dict[str, Any] | None = None
    args: dict[str, Any] | None = None
    id: str | None = None


class _ScriptError(msgspec.Struct, forbid_unknown_fields=True):
    message: str
    code: str = ErrorCode.PROVIDER_ERROR


class _Script(msgspec.Struct, forbid_unknown_fields=True):
    text: str | list[str] = ""
    thinking: str | list[str] = ""
    tool_calls: list[_ScriptCall] = msgspec.field(default_factory=list)
    error: str | _ScriptError | None = None
    hang: bool = False
    delay: float = 0.0
    first_delay: float = 0.0
    finish: FinishReason = "stop"


def words(text: str) -> list[str]:
    """``text`` in streaming pieces: each word with the space before it."""
    return _WORDS.findall(text)


def count_words(request: ProviderRequest) -> int:
    """Deterministic token count: the words of the system prompt, messages and tools."""
    total = len((request.system_prompt or "").split())
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                total += len(part.text.split())
            else:
                total += 1
        for call in message.tool_calls:
            total += 1 + len(call.args)
    for tool in request.tools:
        total += 1 + len(tool.description.split())
    return max(1, total)


class EchoProvider(MockProvider):
    """A provider that answers with the last user message, word by word.

    A user message that is a JSON object with only these keys scripts the reply:
    ``text`` (a string, streamed word by word, or a list of chunks), ``thinking``,
    ``tool_calls`` (``[{"name": ..., "arguments": {...}}]``; ``args`` and ``id`` are
    accepted too), ``error`` (a message, or ``{"message", "code"}``), ``hang`` (wait
    until aborted), ``delay`` and ``first_delay`` (seconds) and ``finish``. Right after
    tool results it answers with them, one ``name -> result`` line per call. It counts
    tokens as words. ``delay`` waits between streamed pieces, to watch them arrive.
    """

    def __init__(
        self,
        *,
        name: str = "echo",
        default_model: str | None = "echo",
        delay: float = 0.0,
        capabilities: ModelCapabilities | None = None,
        models: MockModels | Iterable[ModelInfo | str] | None = None,
        embedding_dimensions: int | None = None,
    ) -> None:
        super().__init__(
            name,
            default_model=default_model,
            capabilities=capabilities
            or ModelCapabilities(
                tools=True, vision=False, thinking=False, completion=True, context_window=32768
            ),
            token_counter=count_words,
            models=models,
            embedding_dimensions=embedding_dimensions,
        )
        self.delay = delay

    def chat_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Echo the prompt, play its script, or report the tool results."""
        self.requests.append(request)
        number = len(self.requests)
        reply = self.reply_for(request, number)
        prompt_tokens = count_words(request)
        if reply.error is None and not reply.hang and reply.usage is None:
            produced = sum(len(chunk.split()) for chunk in reply.text)
            reply.usage = Usage(prompt_tokens, produced, prompt_tokens + produced)
        return self._play(reply, request, number)

    def reply_for(self, request: ProviderRequest, number: int) -> Reply:
        """The reply to ``request`` (the ``number``-th this provider received)."""
        messages = request.messages
        results = _trailing_tool_results(messages)
        if results:
            text = "\n".join(f"{m.name} -> {m.text}" for m in results)
            return Reply(words(text), delay=self.delay)
        prompt = next((m.text for m in reversed(messages) if m.role == "user"), "")
        script = _parse_script(prompt)
        if script is None:
            return Reply(words(prompt), delay=self.delay)
        if isinstance(script, ErrorEvent):
            return Reply(error=script)
        return _script_reply(script, number, self.delay)

    def __repr__(self) -> str:
        return f"<EchoProvider {self.name!r}, {len(self.requests)} requests>"


def _trailing_tool_results(messages: tuple[Message, ...]) -> list[Message]:
    results: list[Message] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.append(message)
    results.reverse()
    return results


def _parse_script(prompt: str) -> _Script | ErrorEvent | None:
    text = prompt.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        raw = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    if not isinstance(raw, dict) or not raw or not set(raw) <= _SCRIPT_KEYS:
        return None  # an ordinary JSON object: echo it
    try:
        return msgspec.convert(raw, _Script)
    except msgspec.ValidationError as exc:
        return ErrorEvent(
            f"The echo script is not valid: {exc}. Its keys are text, thinking, tool_calls "
            '([{"name": ..., "arguments": {...}}]), error, hang, delay, first_delay, finish.',
            ErrorCode.INVALID_REQUEST,
        )


def _script_reply(script: _Script, number: int, delay: float) -> Reply:
    calls = [
        ToolCall(
            id=call.id or f"call_echo_{number}_{index}",
            name=call.name,
            args=dict(call.arguments if call.arguments is not None else call.args or {}),
        )
        for index, call in enumerate(script.tool_calls)
    ]
    error: ErrorEvent | None = None
    if isinstance(script.error, str):
        error = ErrorEvent(script.error, ErrorCode.PROVIDER_ERROR)
    elif script.error is not None:
        error = ErrorEvent(script.error.message, script.error.code)
    return Reply(
        words(script.text) if isinstance(script.text, str) else script.text,
        thinking=words(script.thinking) if isinstance(script.thinking, str) else script.thinking,
        tool_calls=calls,
        finish=script.finish,
        error=error,
        hang=script.hang,
        delay=script.delay or delay,
        first_delay=script.first_delay,
    )
