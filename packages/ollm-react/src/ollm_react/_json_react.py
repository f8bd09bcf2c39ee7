"""``JsonReActStrategy`` (``json-react``): ReAct's steps as JSON objects the backend
constrains, for models without native tools.

Each reply is one JSON object, ``{"thought": ..., "action": ...}``, whose action is a
tool call (``{"tool": NAME, "arguments": {...}}``, the arguments of that tool's JSON
Schema) or the final answer (``{"final_answer": "..."}``). The schema of that object
goes in the request's ``response_format``, which the backend keeps to while it
decodes: a llama.cpp grammar (ollm-llamacpp), Ollama's ``format``, an OpenAI-compatible
server's ``response_format`` (``json_schema``). So a call is always parseable, names a
real tool and has arguments of its schema; the runtime still validates them.

The answer stays grounded: a tool's result comes back as the user turn of the step
that answers, with the question it answers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

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
from ollm_react._instructions import render_schema
from ollm_react._memory import CallMemory
from ollm_react._placeholder import ANSWER_WORDS, is_placeholder
from ollm_react._render import result_json
from ollm_react._strategy import _Inner

__all__ = ["JsonReActStrategy", "step_schema"]

_FEEDBACK = "Your reply could not be used:"
_WRAP_UP = "You have used all the tool calls allowed for this question."
# A 270M model's thought otherwise runs until the reply's bound: a few sentences.
_THOUGHT_LIMIT = 120


def step_schema(
    tools: Sequence[ToolSchema], *, answer: bool = True, only: str | None = None
) -> dict[str, Any]:
    """The JSON Schema of one step: a thought, then a call of one of ``tools`` (or of
    ``only``) or, when ``answer``, the final answer."""
    actions: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {
                "tool": {"const": tool.name},
                "arguments": _arguments_schema(tool.parameters),
            },
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
        if only is None or tool.name == only
    ]
    if answer or not actions:
        actions.append(
            {
                "type": "object",
                "properties": {"final_answer": {"type": "string", "minLength": 1}},
                "required": ["final_answer"],
                "additionalProperties": False,
            }
        )
    action = actions[0] if len(actions) == 1 else {"anyOf": actions}
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": _THOUGHT_LIMIT},
            "action": action,
        },
        "required": ["thought", "action"],
        "additionalProperties": False,
    }


def _arguments_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    if parameters.get("type") == "object" or "properties" in parameters:
        return {"type": "object", **parameters}
    return {"type": "object"}


def instructions(tools: Sequence[ToolSchema]) -> str:
    """What the model reads of the protocol: the tools, and the two actions in words."""
    listed = "\n\n".join(
        f"- {tool.name}: {tool.description.strip() or '(no description)'}\n"
        f"  Arguments (JSON Schema): {render_schema(tool.parameters)}"
        for tool in tools
    )
    return (
        "You can use tools to answer. The tools are:\n\n"
        f"{listed}\n\n"
        "Reply with one JSON object with two keys. thought: your short reasoning. "
        'action: either {"tool": the tool name, "arguments": the arguments as a JSON '
        "object} to use a tool, or, when you have what you need or need no tool, an "
        f"object whose one key, final_answer, holds {ANSWER_WORDS}. A tool's result "
        "comes back in the next message; use it in your final answer."
    )


class JsonReActStrategy:
    """ReAct with each step a JSON object the backend constrains (see the module)."""

    # Its replies are its own JSON: typed output is asked for in the prompt.
    text_protocol = True

    def __init__(self, *, max_format_errors: int = 3, name: str = "json-react") -> None:
        self._name = name
        self.max_format_errors = max_format_errors
        self._tools: tuple[ToolSchema, ...] = ()
        self._format_errors = 0
        self._chunks: list[str] = []
        self._call_id = "json_react_1"
        self._wrap_up_next = False
        self._wrapping_up = False
        self._calls = CallMemory()

    @property
    def name(self) -> str:
        """The registry name."""
        return self._name

    # -- the request -------------------------------------------------------------------

    def prepare(self, request: ProviderRequest) -> ProviderRequest:
        """The request as the provider receives it (the runtime counts its tokens)."""
        return self._step_request(request, answer_only=False)

    def _step_request(self, request: ProviderRequest, *, answer_only: bool) -> ProviderRequest:
        if request.tools:
            self._tools = request.tools
        tools = self._tools
        first = not any(m.role == "tool" for m in _since_question(request.messages))
        choice = request.tool_choice
        only = choice if first and any(t.name == choice for t in tools) else None
        answer = answer_only or not (first and (choice == "required" or only is not None))
        schema = step_schema(() if answer_only else tools, answer=answer, only=only)
        text = instructions(tools) if tools else None
        system = request.system_prompt
        prompt = f"{text}\n\n{system}" if text and system else (text or system)
        return msgspec.structs.replace(
            request,
            messages=render_steps(request.messages),
            system_prompt=prompt,
            tools=(),
            tool_choice="auto",
            response_format=schema,
        )

    # -- the stream --------------------------------------------------------------------

    def stream(
        self, provider: ProviderAdapter, request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        """Send the step; yield its thought, then its call or its answer."""
        self._chunks = []
        self._wrapping_up, self._wrap_up_next = self._wrap_up_next, False
        made = sum(len(m.tool_calls) for m in request.messages if m.role == "assistant")
        self._call_id = f"json_react_{made + 1}"
        self._calls.learn(request.messages)
        return self._stream(provider, self._step_request(request, answer_only=self._wrapping_up))

    async def _stream(
        self, provider: ProviderAdapter, request: ProviderRequest
    ) -> AsyncIterator[ProviderEvent]:
        # Closed here, whichever way the step ends: a provider in the process holds its
        # model until its stream is closed (the next request would wait for it).
        inner = _Inner(provider.chat_stream(request))
        try:
            async for event in inner.events:
                for shown in self._step_events(event):
                    yield shown
                if isinstance(event, (FinishEvent, ErrorEvent)):
                    return
        finally:
            await inner.close()

    def _step_events(self, event: ProviderEvent) -> list[ProviderEvent]:
        """What one provider event shows of the step."""
        if isinstance(event, TextEvent):
            # The JSON itself is never shown: its parts are, once it is whole.
            self._chunks.append(event.text)
            return []
        if isinstance(event, FinishEvent):
            return [*self._shown(), event]
        if isinstance(event, ToolCallEvent):
            return []  # a native call in a constrained reply: not this protocol's
        return [event]

    def _shown(self) -> list[ProviderEvent]:
        step = _decode("".join(self._chunks), self._tools)
        if isinstance(step, str):
            return []
        thought, tool, value = step
        events: list[ProviderEvent] = [ThinkingEvent(thought)] if thought else []
        if tool is None:
            if not is_placeholder(str(value)):
                events.append(TextEvent(str(value)))
        elif not self._wrapping_up:
            events.append(ToolCallEvent(ToolCall(self._call_id, tool, value)))
        return events

    # -- the review --------------------------------------------------------------------

    def review(self, reply: Message) -> ReplyReview | None:
        """The step's call or answer as ollm's canonical message; a malformed step gets
        a correction (the backend did not constrain it, or it was cut short)."""
        raw = "".join(self._chunks) or reply.text
        step = _decode(raw, self._tools)
        if not isinstance(step, str):
            thought, tool, value = step
            if tool is None and is_placeholder(str(value)):
                step = f"the final_answer was a placeholder, {value!r}, not an answer"
            elif tool is None or self._wrapping_up:
                self._format_errors = 0
                answer = str(value) if tool is None else "I could not finish within the turn limit."
                return ReplyReview(
                    message=Message.assistant(answer, thinking=thought or None),
                    events=() if tool is None else (TextEvent(answer),),
                )
            else:
                self._format_errors = 0
                return self._call(ToolCall(self._call_id, tool, value), thought)
        self._format_errors += 1
        message = Message.assistant(raw)
        if self._format_errors >= self.max_format_errors:
            return ReplyReview(
                message=message,
                error=ErrorEvent(
                    f"The model's last {self._format_errors} replies were not the JSON step "
                    f"the json-react strategy asks for (the last one: {step}). The backend "
                    "may not constrain its output: use --tool-strategy react-example, or a "
                    "larger model.",
                    ErrorCode.FORMAT_ERROR,
                ),
            )
        return ReplyReview(
            message=message,
            feedback=(
                f"{_FEEDBACK} {step}. Reply with one JSON object with a thought and an "
                "action, as the instructions say."
            ),
        )

    def _call(self, call: ToolCall, thought: str) -> ReplyReview:
        """The step's call; made again with the same arguments, it does not run: it gets
        the first one's result, and the next step can only answer. (At temperature 0 a
        small model repeats a failing call until the turn limit, its prompt the same.)"""
        message = Message.assistant("", tool_calls=(call,), thinking=thought or None)
        if not self._calls.made(call):
            self._calls.record(call)
            return ReplyReview(message=message)
        why = (
            "it was already called with these same arguments; its result was: "
            f"{self._calls.shown(call)}. Give your final answer now, from what you know."
        )
        self._wrap_up_next = True
        return ReplyReview(message=message, results={call.id: why})

    # -- the turn limit ----------------------------------------------------------------

    def wrap_up(self, request: ProviderRequest) -> ProviderRequest | None:
        """One last step that can only answer."""
        if request.tools:
            self._tools = request.tools
        self._wrap_up_next = True
        return msgspec.structs.replace(
            request,
            messages=(
                *request.messages,
                Message.user(f"{_WRAP_UP} Give your final answer now, from what you already know."),
            ),
        )


def _since_question(messages: Sequence[Message]) -> Sequence[Message]:
    """The messages after the last user message that is not a tool result's."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return messages[index + 1 :]
    return messages


def _decode(text: str, tools: Sequence[ToolSchema]) -> tuple[str, str | None, Any] | str:
    """``(thought, tool, arguments)`` or ``(thought, None, answer)``; what is wrong, as
    words, when the text is not such a step."""
    try:
        step = json.loads(text)
    except (ValueError, RecursionError):
        return "it was not one whole JSON object"
    if not isinstance(step, dict) or not isinstance(step.get("action"), dict):
        return 'it had no "action" object'
    thought = step.get("thought")
    thought = thought.strip() if isinstance(thought, str) else ""
    action = step["action"]
    if "final_answer" in action:
        answer = action["final_answer"]
        if not isinstance(answer, str) or not answer.strip():
            return "the final_answer was empty"
        return thought, None, answer.strip()
    tool = action.get("tool")
    names = [t.name for t in tools]
    if tool not in names:
        return f"there is no tool named {tool!r} (the tools are: {', '.join(names) or 'none'})"
    arguments = action.get("arguments", {})
    if not isinstance(arguments, dict):
        return f"the arguments of {tool} were not a JSON object"
    return thought, str(tool), arguments


def render_steps(messages: Sequence[Message]) -> tuple[Message, ...]:
    """The history as the JSON steps the model wrote, and its tools' results."""
    rendered: list[Message] = []
    question = ""
    calls: dict[str, str] = {}
    for message in messages:
        if message.role == "user":
            if not message.text.startswith((_FEEDBACK, _WRAP_UP)):
                question = message.text
            rendered.append(message)
        elif message.role == "assistant":
            thought = (message.thinking or "").strip()
            if message.tool_calls:
                call = message.tool_calls[0]
                calls[call.id] = call.name
                action: dict[str, Any] = {"tool": call.name, "arguments": call.args}
            elif message.incomplete or (
                message.text.lstrip().startswith("{") and isinstance(_decode(message.text, ()), str)
            ):
                # Kept as the model wrote it (cut short, or a malformed step before its
                # correction): shown as it was.
                rendered.append(message)
                continue
            else:
                action = {"final_answer": message.text}
            step = {"thought": thought, "action": action}
            rendered.append(Message.assistant(json.dumps(step, ensure_ascii=False, default=str)))
        elif message.role == "tool":
            name = calls.get(message.tool_call_id or "", "the tool")
            result = (
                json.dumps({"error": message.text}, ensure_ascii=False)
                if message.is_error
                else result_json(message.text)
            )
            # The step that answers reads the result beside the question it answers.
            rendered.append(
                Message.user(
                    f"Result of {name}: {result}\nThe question was: {question}\n"
                    "Use this result in your final answer, or use another tool."
                )
            )
        else:
            rendered.append(message)
    return tuple(rendered)
