"""ollm's requests in the Chat Completions format, and tool calls assembled from deltas.

The rules (WIRE.md): the system prompt is the first message; a user message with images
is a list of ``text`` and ``image_url`` parts (``data:`` URLs); an assistant message
keeps its tool calls with arguments as a JSON *string*; a tool result is a ``tool``
message with the ``tool_call_id`` it answers. ``tools`` and ``tool_choice`` are sent
only when tools are offered.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from ollm import encode_json
from ollm.errors import InvalidRequestError
from ollm.kit import new_call_id
from ollm.types import (
    ImagePart,
    Message,
    ProviderRequest,
    TextPart,
    ToolCall,
    ToolCallDeltaEvent,
    ToolSchema,
)
from ollm_http import option_number, stop_sequences
from ollm_openai._config import Engine, MaxTokensField, OpenAIConfig
from ollm_openai._wire import ToolCallDelta

__all__ = [
    "FormatRung",
    "ToolCallAssembler",
    "build_body",
    "message_to_openai",
    "response_format_at",
    "tool_to_openai",
]

_encode = msgspec.json.Encoder().encode

_REASONING_EFFORTS = ("minimal", "low", "medium", "high")

# repeat_penalty by the name each engine takes: vLLM and SGLang (and, unknown, the
# most common) `repetition_penalty`, llama.cpp and llama-cpp-python `repeat_penalty`;
# Ollama's /v1 and OpenAI have none (not sent, a notice says so).
_REPEAT_PENALTY: dict[Engine | None, str | None] = {
    None: "repetition_penalty",
    "vllm": "repetition_penalty",
    "sglang": "repetition_penalty",
    "llamacpp": "repeat_penalty",
    "ollama": None,
    "openai": None,
}


# -- messages --------------------------------------------------------------------------


def _image_url(part: ImagePart) -> dict[str, Any]:
    data = base64.b64encode(part.data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{part.mime_type};base64,{data}"}}


def _text_of(message: Message) -> str:
    return "".join(part.text for part in message.parts if isinstance(part, TextPart))


def message_to_openai(message: Message) -> list[dict[str, Any]]:
    """One ollm message as Chat Completions messages (a tool result with images is two)."""
    role = message.role
    images = [part for part in message.parts if isinstance(part, ImagePart)]
    if role == "assistant":
        # "content" stays a string, "" beside calls: OpenAI takes "" or null, and
        # llama-cpp-python's server refuses null (HTTP 500).
        wire: dict[str, Any] = {"role": "assistant", "content": _text_of(message)}
        if message.tool_calls:
            wire["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": encode_json(call.args, _encode).decode(),
                    },
                }
                for call in message.tool_calls
            ]
        return [wire]
    if role == "tool":
        if message.tool_call_id is None:
            # A result that answers no native call (a strategy's): the model reads it as text.
            return [{"role": "user", "content": _text_of(message)}]
        tool: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": _text_of(message),
        }
        if not images:
            return [tool]
        # A tool message holds text only: the images follow in a user message.
        name = f" {message.name!r}" if message.name else ""
        follow = [{"type": "text", "text": f"The images the tool{name} returned:"}]
        return [tool, {"role": "user", "content": follow + [_image_url(i) for i in images]}]
    if not images:
        return [{"role": role, "content": _text_of(message)}]
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "text": part.text})
        else:
            parts.append(_image_url(part))
    return [{"role": role, "content": parts}]


def tool_to_openai(tool: ToolSchema) -> dict[str, Any]:
    """A tool as ``{"type": "function", "function": {name, description, parameters}}``."""
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.parameters}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _tool_choice(choice: str, tools: tuple[ToolSchema, ...]) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    if any(tool.name == choice for tool in tools):
        return {"type": "function", "function": {"name": choice}}
    raise InvalidRequestError(
        f"tool_choice {choice!r} is none of 'auto', 'none', 'required' or the name of an "
        f"offered tool ({', '.join(t.name for t in tools)})."
    )


# -- the request -----------------------------------------------------------------------


def _response_format(value: object) -> dict[str, Any] | None:
    if value is None or value == "":
        return None
    if value == "json":
        return {"type": "json_object"}
    if isinstance(value, dict):
        if value.get("type") in ("json_object", "json_schema", "text") and (
            "json_schema" in value or value.get("type") != "json_schema"
        ):
            return value  # already in OpenAI's shape
        name = value.get("title") if isinstance(value.get("title"), str) else "response"
        safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(name))[:64]
        strict = _strict_schema(value)
        if strict is not None:
            # Structured Outputs: the server decodes within the schema, always.
            return {
                "type": "json_schema",
                "json_schema": {"name": safe or "response", "schema": strict, "strict": True},
            }
        return {"type": "json_schema", "json_schema": {"name": safe or "response", "schema": value}}
    raise InvalidRequestError(
        f"response_format must be 'json' or a JSON Schema object, not {value!r}."
    )


def _strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` as OpenAI's strict mode takes it, or ``None`` when it cannot be.

    Strict mode wants the root an object, every object's properties all required and
    closed (``additionalProperties: false``, added here), and no ``default``: a schema
    with optional fields stays a plain, unenforced ``json_schema``."""
    if schema.get("type") != "object":
        return None

    def closed(node: Any, depth: int) -> Any:
        if depth > 64:
            raise ValueError("nested too deeply")
        if isinstance(node, list):
            return [closed(item, depth + 1) for item in node]
        if not isinstance(node, dict):
            return node
        if "default" in node:
            raise ValueError("a default")
        out = {key: closed(value, depth + 1) for key, value in node.items()}
        if node.get("type") == "object":
            properties = node.get("properties")
            if not isinstance(properties, dict) or not properties:
                raise ValueError("an object without properties")
            if set(node.get("required") or ()) != set(properties):
                raise ValueError("an optional property")
            if node.get("additionalProperties", False) is not False:
                raise ValueError("open properties")
            out["additionalProperties"] = False
        return out

    try:
        strict: dict[str, Any] = closed(schema, 0)
    except ValueError:
        return None
    return strict


FormatRung = Literal["json_schema", "json_object", "prompted"]
"""How far down the typed-output ladder a server is: ``json_schema``, else any JSON
object (``json_object``), else no ``response_format`` (the schema is in the prompt)."""


def response_format_at(
    value: object, rung: FormatRung, engine: Engine | None = None
) -> dict[str, Any] | None:
    """``response_format`` for ``value`` (``"json"`` or a JSON Schema) on ``rung``.

    llama.cpp's servers (llama-server, llama-cpp-python) constrain ``json_object`` to a
    ``schema`` member: the schema goes there for them (others get the type alone)."""
    shaped = _response_format(value)
    if shaped is None or rung == "json_schema":
        return shaped
    if rung == "prompted":
        return None
    if shaped.get("type") != "json_schema":
        return shaped
    schema = shaped.get("json_schema", {}).get("schema")
    if engine == "llamacpp" and isinstance(schema, dict):
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}


def build_body(
    request: ProviderRequest,
    config: OpenAIConfig,
    *,
    stream: bool,
    include_usage: bool,
    max_tokens_field: MaxTokensField,
    format_rung: FormatRung = "json_schema",
    engine: Engine | None = None,
) -> dict[str, Any]:
    """The ``/chat/completions`` body for ``request``, with the option names ``engine``
    takes (unknown: vLLM's)."""
    if not isinstance(request.model, str) or not request.model.strip():
        raise InvalidRequestError(
            "The request names no model. Pass model=... (ollm chat -m NAME), or set a "
            "default model (OLLM_OPENAI_MODEL, or model = ... in the profile)."
        )
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    for message in request.messages:
        messages.extend(message_to_openai(message))
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    options = request.options
    # `extra` first, so that the named options win over a key it repeats.
    if options.extra:
        body.update(options.extra)
    if stream:
        body["stream"] = True
        if include_usage:
            body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = [tool_to_openai(tool) for tool in request.tools]
        body["tool_choice"] = _tool_choice(request.tool_choice, request.tools)
    if options.temperature is not None:
        body["temperature"] = option_number("temperature", options.temperature)
    if options.top_p is not None:
        body["top_p"] = option_number("top_p", options.top_p)
    if options.seed is not None:
        body["seed"] = option_number("seed", options.seed, integer=True)
    if options.max_tokens is not None:
        body[max_tokens_field] = option_number("max_tokens", options.max_tokens, integer=True)
    if options.stop is not None:
        items = stop_sequences(options.stop)
        if items:
            body["stop"] = items
    openai = config.official or engine == "openai"
    if not openai and options.top_k is not None:
        # Accepted by vLLM, SGLang, llama.cpp and LM Studio; refused by OpenAI itself.
        body["top_k"] = option_number("top_k", options.top_k, integer=True)
    if options.repeat_penalty is not None:
        name = None if openai else _REPEAT_PENALTY.get(engine, "repetition_penalty")
        if name is not None:
            body[name] = option_number("repeat_penalty", options.repeat_penalty)
    response_format = response_format_at(request.response_format, format_rung, engine)
    if response_format is not None:
        body["response_format"] = response_format
    think = request.think
    if isinstance(think, str) and think:
        if think not in _REASONING_EFFORTS:
            raise InvalidRequestError(
                f"The thinking level {think!r} is not one an OpenAI-compatible server takes: "
                f"use {', '.join(_REASONING_EFFORTS)} (a reasoning effort), on or off."
            )
        body["reasoning_effort"] = think
    elif think is False and not openai:
        # vLLM and SGLang pass this to the chat template (Qwen3, DeepSeek R1 distills...).
        body.setdefault("chat_template_kwargs", {"enable_thinking": False})
    if config.affinity_user and request.conversation_id:
        body["user"] = request.conversation_id
    return body


# -- tool calls from deltas ------------------------------------------------------------


@dataclass
class _Pending:
    id: str | None = None
    name: str = ""
    pieces: list[str] = field(default_factory=list)
    whole: dict[str, Any] | None = None


class ToolCallAssembler:
    """Tool calls built from a stream's deltas.

    The first delta of a call carries its ``index``, ``id`` and name, later ones pieces
    of the arguments; parallel calls interleave by ``index``. Servers that leave the
    index out (one whole call per delta) get the next one; a delta that repeats the id
    or name of its call adds nothing.
    """

    __slots__ = ("_calls", "_last")

    def __init__(self) -> None:
        self._calls: dict[int, _Pending] = {}
        self._last: int | None = None

    def __bool__(self) -> bool:
        return bool(self._calls)

    def feed(self, deltas: list[ToolCallDelta]) -> list[ToolCallDeltaEvent]:
        """Add the tool-call deltas of one chunk; each as an event, for a chat that asked
        to see calls as they are written (its index resolved, its id and name given the
        first time)."""
        events: list[ToolCallDeltaEvent] = []
        for delta in deltas:
            index = delta.index
            function = delta.function
            if index is None:
                pending = self._calls.get(self._last) if self._last is not None else None
                starts = pending is None or (
                    (delta.id is not None and delta.id != pending.id)
                    or (function is not None and bool(function.name) and bool(pending.name))
                )
                index = (max(self._calls) + 1 if self._calls else 0) if starts else self._last
                assert index is not None
            call = self._calls.get(index)
            if call is None:
                call = self._calls[index] = _Pending()
            self._last = index
            new_id = new_name = None
            if delta.id and not call.id:
                call.id = new_id = delta.id
            piece = ""
            if function is not None:
                if function.name and not call.name:
                    call.name = new_name = function.name
                arguments = function.arguments
                if isinstance(arguments, str):
                    if arguments:
                        call.pieces.append(arguments)
                        piece = arguments
                elif isinstance(arguments, dict):
                    call.whole = arguments
                    piece = encode_json(arguments, _encode).decode()
            if new_id or new_name or piece:
                events.append(ToolCallDeltaEvent(index, new_id, new_name, piece))
        return events

    def calls(self) -> list[ToolCall]:
        """The calls, in index order; arguments that are not a JSON object are kept aside."""
        result: list[ToolCall] = []
        for index in sorted(self._calls):
            pending = self._calls[index]
            call_id = pending.id or new_call_id()
            if pending.whole is not None and not pending.pieces:
                result.append(ToolCall(call_id, pending.name, pending.whole))
                continue
            text = "".join(pending.pieces)
            if not text.strip():
                result.append(ToolCall(call_id, pending.name, {}))
                continue
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                value = None
            if isinstance(value, dict):
                result.append(ToolCall(call_id, pending.name, value))
            else:
                result.append(ToolCall(call_id, pending.name, {}, invalid_args=text))
        return result
