"""``PirateProvider``: every part of the provider contract, with no server behind it.

A real provider does the same with an HTTP client (see ollm-ollama, ollm-openai and
ollm-gemini, built on ollm-http): turn the ``ProviderRequest`` into the backend's
request, turn its reply into provider events, and its failures into ``ErrorEvent``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import anyio

from ollm import (
    ErrorEvent,
    FinishEvent,
    ModelCapabilities,
    ModelInfo,
    ModelNotFoundError,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    Usage,
)
from ollm.errors import ErrorCode

MODELS = {"pirate-small": 2048, "pirate-large": 8192}
_WORDS = {"hello": "ahoy", "hi": "ahoy", "my": "me", "friend": "matey", "yes": "aye", "you": "ye"}
# "call NAME {json}" in the user's message makes the model call that tool (to show calls).
_CALL = re.compile(r"call (\w+) (\{.*\})", re.DOTALL)


class PirateProvider:
    """Answers in pirate speak, word by word; calls a tool when asked to ``call NAME {...}``.

    Required: ``name`` and ``chat_stream``. Optional, found by the runtime when present:
    ``default_model`` (the model when a chat names none), ``handles_abort`` (this
    provider checks ``request.abort`` itself), ``count_tokens`` (``TokenCounting``),
    ``model_capabilities`` (``ModelInspection``), ``list_models``/``show_model``
    (``ModelListing``, for ``ollm models list -p pirate``) and ``aclose`` (``Closeable``).
    """

    name = "pirate"
    default_model = "pirate-small"
    handles_abort = True

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay  # seconds between words, to watch it stream

    async def chat_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """The reply: thinking, text pieces or tool calls, then exactly one finish."""
        if request.model not in MODELS:
            # A failure is an event, not an exception: the runtime keeps the history whole.
            yield ErrorEvent(
                f"There is no model {request.model!r} aboard. Try: {', '.join(MODELS)}.",
                ErrorCode.MODEL_NOT_FOUND,
            )
            return
        last = request.messages[-1] if request.messages else None
        if last is not None and last.role == "tool":
            words = f"the tool said: {last.text}".split()
        else:
            words = (last.text if last is not None else "").split()
        wanted = _CALL.search(last.text) if last is not None and last.role == "user" else None
        offered = {tool.name for tool in request.tools}
        if request.think:
            yield ThinkingEvent("Arr, let me think. ")
        if wanted is not None and wanted.group(1) in offered:
            yield ToolCallEvent(ToolCall("call_1", wanted.group(1), json.loads(wanted.group(2))))
            yield FinishEvent("stop", Usage(prompt_tokens=await self.count_tokens(request)))
            return
        abort = request.abort
        written = 0
        limit = request.options.max_tokens
        for index, word in enumerate(words or ["arr"]):
            if abort is not None and abort.aborted:
                yield FinishEvent("cancelled")  # stopped at once, as promised
                return
            if limit is not None and written >= limit:
                yield FinishEvent("length", self._usage(request, written))
                return
            if self.delay:
                if abort is not None:
                    with abort.guard():  # a wait the abort interrupts
                        await anyio.sleep(self.delay)
                else:
                    await anyio.sleep(self.delay)
            pirate = _WORDS.get(word.lower().strip(",.!?"), word)
            yield TextEvent(pirate if index == 0 else f" {pirate}")
            written += 1
        yield FinishEvent("stop", self._usage(request, written))

    def _usage(self, request: ProviderRequest, written: int) -> Usage:
        prompt = sum(len(m.text.split()) for m in request.messages)
        return Usage(prompt_tokens=prompt, completion_tokens=written, total_tokens=prompt + written)

    async def count_tokens(self, request: ProviderRequest) -> int:
        """A word is a token aboard this ship (the runtime checks the context window)."""
        return max(1, sum(len(m.text.split()) for m in request.messages))

    async def model_capabilities(self, model: str) -> ModelCapabilities:
        """What a model can do; ``None`` means unknown."""
        return ModelCapabilities(tools=True, thinking=True, context_window=MODELS.get(model))

    async def list_models(self) -> list[ModelInfo]:
        return [await self.show_model(name) for name in MODELS]

    async def show_model(self, name: str) -> ModelInfo:
        if name not in MODELS:
            raise ModelNotFoundError(f"No model {name!r} aboard.", provider=self.name, model=name)
        return ModelInfo(
            name=name,
            modified_at=datetime(2026, 1, 1, tzinfo=UTC),
            capabilities=await self.model_capabilities(name),
        )

    async def aclose(self) -> None:
        """Nothing to release here; a real provider closes its connection pool."""
