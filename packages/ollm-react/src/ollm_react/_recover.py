"""Tool calls that native-tool models write as text, recovered as the calls they are.

A model served with native tools sometimes writes its call into the text instead of the
tool-call field: a chat template that does not match, a quantised model, an old server.
``RecoveringStrategy`` is native tool calling (the tools go to the provider as they
are) that also reads these calls from the text, while it streams:

- Hermes / Qwen: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``, one block
  per call, anywhere in the reply;
- Llama 3.x: ``<|python_tag|>{"name": ..., "parameters": ...}`` to the end of the reply;
- Mistral: ``[TOOL_CALLS][{"name": ..., "arguments": ...}]``, or ``[TOOL_CALLS]name[ARGS]{...}``;
- a reply that is only a JSON call object (``{"name": ..., "arguments"|"parameters": ...}``),
  or a list of them, perhaps in one code fence that is the whole reply.

The rules (README, "Calls written as text"):

- A call is run only if it names an offered tool and its arguments fit the tool's
  schema (a ``pattern`` they miss aside: the runtime reports that to the model, as for
  a native call); anything else stays text, shown as the model wrote it.
- Text inside a code fence is never read as a call, unless the fence is the whole
  reply: a model that shows the user some JSON in an answer is showing it.
- Bare JSON counts only when it is the whole reply and has only a call's keys: a reply
  that answers with JSON data, or mentions JSON in prose, is an answer.
- While streaming, text is held back only as long as it can still be a call: the few
  characters that may begin a tag, and a reply that begins with ``{``, ``[`` or a
  fence (until its first key shows it is not a call). Everything else streams as it
  comes, so an ordinary answer is neither changed nor delayed.
- A recovered call is announced with a ``notice`` event (kind ``recovered``) and runs
  as a native call; the text it was written in is not shown and not kept.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

from ollm.types import (
    FinishEvent,
    Message,
    NoticeEvent,
    ProviderAdapter,
    ProviderEvent,
    ProviderRequest,
    ReplyReview,
    TextEvent,
    ToolCall,
    ToolCallEvent,
    ToolSchema,
)
from ollm_react._arguments import Balance
from ollm_react._blobs import MISSING, call_in
from ollm_react._parser import clean_tool_name, resolve_tool
from ollm_react._schema import schema_problem, without_patterns

__all__ = ["RecoveringStrategy", "TextCallScanner"]

Format = Literal["hermes", "llama", "mistral", "json"]
_TAGS: dict[str, Format] = {
    "<tool_call>": "hermes",
    "<|python_tag|>": "llama",
    "[TOOL_CALLS]": "mistral",
}
_LONGEST_TAG = max(map(len, _TAGS))
_HERMES_CLOSE = "</tool_call>"
_LLAMA_ENDS = ("<|eom_id|>", "<|eot_id|>")
_FENCE = "```"
# The first key of a JSON object that may be a call (anything else is an answer).
_CALL_KEYS = frozenset(
    {"name", "action", "tool", "tool_name", "function", "function_name", "type", "id"}
)
_FIRST_KEY = re.compile(r'\{\s*(?:"((?:[^"\\]|\\.){0,40})(")?)?')
_FENCE_LINE = re.compile(r"```[ \t]*(?:json|JSON|tool_call|tool_code)?[ \t]*\r?\n")
# Held text that grows past this is an answer, whatever it looks like.
MAX_HELD = 64 * 1024

_START, _TEXT, _BARE, _TAG = range(4)

Output = (
    tuple[Literal["text"], str] | tuple[Literal["calls"], list[tuple[str, dict[str, Any]]], str]
)


class TextCallScanner:
    """Feed a native-tool reply's text as it streams; get text to show and calls found."""

    __slots__ = ("_fences", "_held", "_mode", "_out", "_tag", "tools")

    def __init__(self, tools: Sequence[ToolSchema]) -> None:
        self.tools = tuple(tools)
        self._mode = _START
        self._held = ""
        self._tag: str = ""
        self._fences = 0  # fences in the text shown so far (odd: inside a code block)
        self._out: list[Output] = []

    def passes(self, text: str) -> bool:
        """Whether ``text`` can be shown as it is, with nothing to read or hold (the hot path:
        the reply is known to be prose, and this chunk cannot begin a tag or a fence)."""
        return (
            self._mode == _TEXT
            and not self._held
            and "<" not in text
            and "[" not in text
            and "`" not in text
        )

    def feed(self, text: str) -> list[Output]:
        """Take one chunk; return what can be shown (and any calls completed) now."""
        out: list[Output] = []
        self._out = out
        if self.passes(text):
            self._show(text)
            return out
        self._held += text
        self._advance(final=False)
        return out

    def end(self) -> list[Output]:
        """The reply ended: what is left to show, and the calls it held."""
        out: list[Output] = []
        self._out = out
        self._advance(final=True)
        if self._held:
            self._show(self._held)
            self._held = ""
        return out

    # -- decisions ---------------------------------------------------------------------

    def _advance(self, *, final: bool) -> None:
        while True:
            mode = self._mode
            if mode == _START:
                if not self._start(final):
                    return
            elif mode == _BARE:
                if not self._bare(final):
                    return
            elif mode == _TAG:
                if not self._tagged(final):
                    return
            else:
                self._text(final)
                return

    def _start(self, final: bool) -> bool:
        body = self._held.lstrip()
        if not body:
            # Leading space: shown now; what follows decides.
            self._show(self._held)
            self._held = ""
            return False
        if body[0] in "{[":
            self._mode = _BARE
            return True
        if body[0] == "`":
            match = _FENCE_LINE.match(body)
            if match is not None:
                rest = body[match.end() :].lstrip()
                if not rest and not final:
                    return False
                self._mode = _BARE if rest[:1] in ("{", "[") else _TEXT
                return True
            if not final and "\n" not in body and len(body) < 40:
                return False  # "```js" may still become "```json\n"
        self._mode = _TEXT
        return True

    def _bare(self, final: bool) -> bool:
        """A reply that began with ``{``, ``[`` or a fence: a call only if that is all."""
        body = self._held.lstrip()
        fenced = body.startswith("`")
        if fenced:
            match = _FENCE_LINE.match(body)
            assert match is not None
            body = body[match.end() :].lstrip()
        if len(body) > MAX_HELD or not _may_be_call(body):
            return self._give_up()
        end = Balance("{[").feed(body)
        if end < 0:
            if final:
                return self._give_up()
            return False
        rest = body[end:].strip()
        if fenced:
            if not final and _FENCE.startswith(rest):
                return False  # the closing fence, still coming
            rest = rest.removeprefix(_FENCE).strip()
        if rest:
            return self._give_up()
        calls = self._calls(body[:end], strict=True)
        if calls is None:
            return self._give_up()
        if not final:
            return False  # a call so far: it must stay the whole reply
        self._held = ""
        self._out.append(("calls", calls, "json"))
        self._mode = _TEXT
        return False

    def _give_up(self) -> bool:
        self._mode = _TEXT
        return True

    def _tagged(self, final: bool) -> bool:
        tag = self._tag
        held = self._held
        content = held[len(tag) :]
        if _TAGS[tag] == "hermes":
            close = content.find(_HERMES_CLOSE)
            if close < 0 and not final:
                return self._release_tag() if len(held) > MAX_HELD else False
            inner = content[:close] if close >= 0 else content
            after = content[close + len(_HERMES_CLOSE) :] if close >= 0 else ""
            calls = self._calls(inner.strip(), strict=False)
            if calls is None:
                if close < 0:
                    return self._release_tag()
                # Only this block is text: a block after it may still be a call, as it
                # is when the two arrive in separate chunks.
                self._show(held[: len(tag) + close + len(_HERMES_CLOSE)])
            else:
                self._out.append(("calls", calls, "hermes"))
            self._held = after
            self._mode = _TEXT
            return True
        if not final:
            return self._release_tag() if len(held) > MAX_HELD else False
        calls = self._tail_calls(_TAGS[tag], content)
        if calls is None:
            return self._release_tag()
        self._out.append(("calls", calls, _TAGS[tag]))
        self._held = ""
        self._mode = _TEXT
        return False

    def _release_tag(self) -> bool:
        """The tag held no valid call: it is text after all."""
        self._show(self._held)
        self._held = ""
        self._mode = _TEXT
        return False

    def _text(self, final: bool) -> None:
        held = self._held
        position, tag = self._find_tag(held)
        while tag:
            self._show(held[:position])
            self._held = held[position:]
            self._tag = tag
            self._mode = _TAG
            self._advance(final=final)
            if self._mode != _TEXT:
                return
            held = self._held
            position, tag = self._find_tag(held)
        if final:
            self._show(held)
            self._held = ""
            return
        keep = self._undecided_tail(held)
        self._show(held[: len(held) - keep])
        self._held = held[len(held) - keep :]

    def _find_tag(self, text: str) -> tuple[int, str]:
        """The first tag outside a code fence, as ``(position, tag)``; ``(-1, "")`` if none."""
        fences = self._fences
        start = 0
        while True:
            found = [(text.find(tag, start), tag) for tag in _TAGS]
            found = [(p, t) for p, t in found if p >= 0]
            if not found:
                return -1, ""
            position, tag = min(found)
            if (fences + text.count(_FENCE, 0, position)) % 2 == 0:
                return position, tag
            start = position + 1

    def _undecided_tail(self, text: str) -> int:
        """How many characters at the end may still begin a tag or a fence."""
        for size in range(min(len(text), _LONGEST_TAG - 1), 0, -1):
            tail = text[-size:]
            if any(tag.startswith(tail) for tag in _TAGS) or _FENCE.startswith(tail):
                return size
        return 0

    def _show(self, text: str) -> None:
        if not text:
            return
        self._fences += text.count(_FENCE)
        out = self._out
        if out and out[-1][0] == "text":
            out[-1] = ("text", out[-1][1] + text)
        else:
            out.append(("text", text))

    # -- reading calls -----------------------------------------------------------------

    def _calls(self, text: str, *, strict: bool) -> list[tuple[str, dict[str, Any]]] | None:
        """The calls a JSON text holds (an object, or a list of them), all valid, or None."""
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return None
        items = value if isinstance(value, list) else [value]
        if not items:
            return None
        calls = []
        for item in items:
            call = self._valid(call_in(item, strict=strict))
            if call is None:
                return None
            calls.append(call)
        return calls

    def _tail_calls(self, kind: Format, content: str) -> list[tuple[str, dict[str, Any]]] | None:
        """The calls after a Llama or Mistral tag, to the end of the reply."""
        for end in _LLAMA_ENDS:
            content = content.replace(end, "")
        pieces = content.split("[TOOL_CALLS]") if kind == "mistral" else [content]
        calls: list[tuple[str, dict[str, Any]]] = []
        for piece in pieces:
            piece = piece.strip()
            if not piece:
                continue
            if kind == "mistral" and piece[0] not in "{[":
                # [TOOL_CALLS]name[ARGS]{...} (Mistral's newer templates)
                name, _, args = piece.partition("[ARGS]")
                if not args:
                    name, brace, args = piece.partition("{")
                    args = brace + args
                found = self._valid((name.strip(), _loads(args.strip())))
                if found is None:
                    return None
                calls.append(found)
                continue
            decoder = json.JSONDecoder()
            index = 0
            while index < len(piece):
                try:
                    value, index = decoder.raw_decode(piece, index)
                except (ValueError, RecursionError):
                    return None
                for item in value if isinstance(value, list) else [value]:
                    found = self._valid(call_in(item))
                    if found is None:
                        return None
                    calls.append(found)
                while index < len(piece) and piece[index] in " \t\r\n;,":
                    index += 1
        return calls or None

    def _valid(self, call: tuple[str, Any] | None) -> tuple[str, dict[str, Any]] | None:
        """The call with an offered tool's name and arguments that fit it, or None."""
        if call is None:
            return None
        name, args = call
        schema, _ = resolve_tool(clean_tool_name(name), self.tools)
        if schema is None:
            return None
        if args is MISSING or args is None:
            args = {}
        if not isinstance(args, dict):
            return None
        # A pattern the arguments miss does not make the text less of a call: the runtime
        # validates them, and the model is told which argument is wrong.
        if schema_problem(args, without_patterns(schema.parameters)) is not None:
            return None
        return schema.name, args


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _may_be_call(body: str) -> bool:
    """Whether a reply that begins with ``body`` can still be a JSON call (or a list)."""
    if body.startswith("["):
        rest = body[1:].lstrip()
        return not rest or (rest[0] == "{" and _may_be_call(rest))
    match = _FIRST_KEY.match(body)
    if match is None:
        return len(body.rstrip()) <= 1 or body[1:].strip() == ""
    key, closed = match.group(1), match.group(2)
    if key is None:
        return match.end() == len(body)  # "{   " so far
    if closed is None:
        return any(k.startswith(key) for k in _CALL_KEYS)
    return key in _CALL_KEYS


class RecoveringStrategy:
    """Native tool calling, and calls written as text run as the calls they are.

    Registered by ``ollm-react`` as ``recover``; the runtime uses it wherever it would
    use native tool calling, unless the chat says ``recover_text_tool_calls=False``
    (``ollm chat --no-recover``).
    """

    name = "recover"

    def prepare(self, request: ProviderRequest) -> ProviderRequest:
        """The request as it is: the tools go to the provider natively."""
        return request

    def stream(
        self, provider: ProviderAdapter, request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        """The provider's stream, with calls written as text turned into tool calls."""
        if not request.tools:
            return provider.chat_stream(request)
        return self._stream(provider, request)

    async def _stream(
        self, provider: ProviderAdapter, request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        scanner = TextCallScanner(request.tools)
        first = sum(len(m.tool_calls) for m in request.messages if m.role == "assistant")
        numbers = itertools.count(first + 1)
        events = provider.chat_stream(request)
        try:
            async for event in events:
                if type(event) is TextEvent:
                    assert isinstance(event, TextEvent)
                    if scanner.passes(event.text):
                        yield event  # prose, shown as it came
                        continue
                    outputs = scanner.feed(event.text)
                    if (
                        len(outputs) == 1
                        and outputs[0][0] == "text"
                        and outputs[0][1] == event.text
                    ):
                        yield event  # shown as it came
                        continue
                    for shown in _events(outputs, request.model, numbers):
                        yield shown
                elif type(event) is not FinishEvent:
                    yield event
                else:
                    for shown in _events(scanner.end(), request.model, numbers):
                        yield shown
                    yield event
                    return
            for shown in _events(scanner.end(), request.model, numbers):
                yield shown
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    def review(self, reply: Message) -> ReplyReview | None:
        """Nothing to judge: recovered calls are already native calls."""
        return None

    def wrap_up(self, request: ProviderRequest) -> ProviderRequest | None:
        """No last request at the turn limit, as with native tool calling."""
        return None


_FORMATS = {
    "hermes": "<tool_call> tags",
    "llama": "Llama's <|python_tag|>",
    "mistral": "Mistral's [TOOL_CALLS]",
    "json": "a JSON object",
}


def _events(outputs: list[Output], model: str, numbers: Any) -> list[ProviderEvent]:
    events: list[ProviderEvent] = []
    for output in outputs:
        if output[0] == "text":
            events.append(TextEvent(output[1]))
            continue
        _, calls, kind = output
        names = ", ".join(name for name, _ in calls)
        several = len(calls) > 1
        events.append(
            NoticeEvent(
                f"{model} wrote {len(calls)} tool call{'s' if several else ''} as text "
                f"({_FORMATS[kind]}): running {names} as "
                f"{'native calls' if several else 'a native call'}.",
                "recovered",
            )
        )
        events.extend(
            ToolCallEvent(ToolCall(f"recovered_{next(numbers)}", name, args))
            for name, args in calls
        )
    return events
