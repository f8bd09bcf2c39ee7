"""ollm's messages, tools and options in Ollama's wire format, and back.

The rules come from ``ollama-wire.md``: the system prompt is the first message; images
are raw base64 (no ``data:`` prefix); an assistant turn keeps its tool calls with
arguments as a JSON object, and its ``thinking``; a tool result carries ``tool_name``
and ``tool_call_id`` (there is no ``name`` field); sampling options go inside
``options`` with Ollama's names (``num_predict``, ``num_ctx``, ``stop`` as a list).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from ollm.errors import BadResponseError, InvalidRequestError
from ollm.kit import new_call_id
from ollm.types import (
    GenerationOptions,
    ImagePart,
    Message,
    ModelCapabilities,
    Part,
    ProviderRequest,
    TextPart,
    ToolCall,
    ToolSchema,
)
from ollm_http import stop_sequences
from ollm_ollama._config import KeepAlive, normalize_keep_alive
from ollm_ollama._wire import (
    ChatRequest,
    ChunkToolCall,
    WireFunction,
    WireMessage,
    WireTool,
    WireToolCall,
    WireToolFunction,
)

__all__ = [
    "build_chat_request",
    "capabilities_from",
    "guess_image_type",
    "message_from_wire",
    "message_to_wire",
    "options_to_wire",
    "parse_parameters",
    "tool_call_from_chunk",
    "tool_from_wire",
    "tool_to_wire",
    "tools_for_choice",
]

log = logging.getLogger(__name__)

# -- messages --------------------------------------------------------------------------


def message_to_wire(message: Message) -> WireMessage:
    """One ollm message as an entry of ``messages[]``.

    Text parts are joined (Ollama's ``content`` is one string); images go to ``images``
    in order. Fields Ollama has no place for (a user's ``name``, ``incomplete``,
    ``is_error``) are left out.
    """
    parts = message.parts
    if len(parts) == 1 and type(parts[0]) is TextPart:
        content = parts[0].text
        images = None
    else:
        content = "".join(p.text for p in parts if isinstance(p, TextPart))
        images = [p.data for p in parts if isinstance(p, ImagePart)] or None
    wire = WireMessage(role=message.role, content=content, images=images)
    role = message.role
    if role == "assistant":
        if message.thinking:
            wire.thinking = message.thinking
        if message.tool_calls:
            wire.tool_calls = [
                WireToolCall(
                    function=WireFunction(name=call.name, arguments=call.args),
                    id=call.id or None,
                )
                for call in message.tool_calls
            ]
    elif role == "tool":
        wire.tool_name = message.name
        wire.tool_call_id = message.tool_call_id
    return wire


def message_from_wire(wire: WireMessage) -> Message:
    """An entry of ``messages[]`` as an ollm message (the inverse of ``message_to_wire``).

    An image's type is read from its first bytes, since Ollama does not carry it.
    """
    role = wire.role.lower()
    parts: list[Part] = [TextPart(wire.content)]
    for data in wire.images or ():
        parts.append(ImagePart(data=data, mime_type=guess_image_type(data)))
    calls = tuple(
        ToolCall(id=call.id or new_call_id(), name=call.function.name, args=call.function.arguments)
        for call in wire.tool_calls or ()
    )
    try:
        return Message(
            role=role,  # type: ignore[arg-type]
            parts=tuple(parts),
            name=wire.tool_name if role == "tool" else None,
            tool_calls=calls,
            tool_call_id=wire.tool_call_id if role == "tool" else None,
            thinking=wire.thinking or None,
        )
    except ValueError as exc:
        raise BadResponseError(f"Not a valid Ollama message: {exc}.") from None


_IMAGE_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
)


def guess_image_type(data: bytes) -> str:
    """The MIME type of an image from its signature; ``image/png`` when unknown."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    for signature, mime in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return mime
    return "image/png"


# -- tools -----------------------------------------------------------------------------


def tool_to_wire(tool: ToolSchema) -> WireTool:
    """A tool as Ollama's ``{"type": "function", "function": {...}}``."""
    return WireTool(
        function=WireToolFunction(
            name=tool.name, description=tool.description, parameters=tool.parameters
        )
    )


def tool_from_wire(tool: WireTool) -> ToolSchema:
    """The inverse of ``tool_to_wire``."""
    function = tool.function
    return ToolSchema(
        name=function.name, description=function.description, parameters=function.parameters
    )


def tools_for_choice(tools: Sequence[ToolSchema], choice: str) -> Sequence[ToolSchema]:
    """The tools to offer: Ollama has no ``tool_choice``, so ollm narrows the list itself.

    ``"none"`` offers none; a tool's name offers only that tool; ``"auto"`` and
    ``"required"`` offer all of them (a name that matches no tool too, with a warning).
    """
    if not tools or choice in ("auto", "required"):
        return tools
    if choice == "none":
        return ()
    chosen = [tool for tool in tools if tool.name == choice]
    if not chosen:
        log.warning("tool_choice %r names none of the tools offered; offering all", choice)
        return tools
    return chosen


def tool_call_from_chunk(call: ChunkToolCall) -> ToolCall:
    """A tool call of a reply chunk: arguments as an object, or a JSON string of one."""
    function = call.function
    if function is None or not function.name:
        raise BadResponseError(
            "Ollama sent a tool call without a function name: "
            f"{msgspec.json.encode(call).decode()[:200]}"
        )
    arguments = function.arguments
    call_id = call.id or new_call_id()
    if arguments is None:
        return ToolCall(id=call_id, name=function.name)
    if isinstance(arguments, dict):
        return ToolCall(id=call_id, name=function.name, args=arguments)
    if not arguments.strip():
        return ToolCall(id=call_id, name=function.name)
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        return ToolCall(id=call_id, name=function.name, args=value)
    # Not an object: the call is refused, and the model reads why (it can call again).
    return ToolCall(id=call_id, name=function.name, invalid_args=arguments)


# -- options and the request -----------------------------------------------------------

_FLOAT_OPTIONS = (
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("repeat_penalty", "repeat_penalty"),
)
_INT_OPTIONS = (
    ("max_tokens", "num_predict"),
    ("top_k", "top_k"),
    ("seed", "seed"),
    ("context_window", "num_ctx"),
)


def options_to_wire(
    options: GenerationOptions, model_stop: Sequence[str] = ()
) -> tuple[dict[str, Any], KeepAlive | None]:
    """``options`` with Ollama's names, and the ``keep_alive`` found in ``extra``.

    ``extra`` passes through first (``min_p``, ``num_gpu``...), so the named fields win.
    A request's ``stop`` replaces the model's own stop list on Ollama, so it is merged
    with ``model_stop`` (the model's, from its Modelfile).
    """
    wire: dict[str, Any] = {}
    keep_alive: KeepAlive | None = None
    if options.extra:
        wire.update(options.extra)
        if "keep_alive" in wire:
            keep_alive = normalize_keep_alive(
                wire.pop("keep_alive"), source='options.extra["keep_alive"]'
            )
    for field, name in _FLOAT_OPTIONS:
        value = getattr(options, field)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidRequestError(f"options.{field} must be a number, not {value!r}.")
            wire[name] = value
    for field, name in _INT_OPTIONS:
        value = getattr(options, field)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidRequestError(f"options.{field} must be an integer, not {value!r}.")
            wire[name] = value
    stop: object = options.stop
    if stop is not None:
        stops = stop_sequences(stop)
        if stops:
            wire["stop"] = _merge_stops(model_stop, stops)
    return wire, keep_alive


def _merge_stops(first: Iterable[str], second: Iterable[str]) -> list[str]:
    merged: dict[str, None] = dict.fromkeys(first)
    merged.update(dict.fromkeys(second))
    return list(merged)


def build_chat_request(
    request: ProviderRequest,
    *,
    keep_alive: KeepAlive | None = None,
    model_stop: Sequence[str] = (),
) -> ChatRequest:
    """The ``/api/chat`` body for ``request`` (always streaming)."""
    if not isinstance(request.model, str) or not request.model.strip():
        raise InvalidRequestError(
            "The request names no model. Pass model=..., for example model='llama3.2'."
        )
    messages: list[WireMessage] = []
    if request.system_prompt:
        messages.append(WireMessage(role="system", content=request.system_prompt))
    messages.extend(message_to_wire(m) for m in request.messages)
    options, extra_keep_alive = options_to_wire(request.options, model_stop)
    tools = tools_for_choice(request.tools, request.tool_choice)
    return ChatRequest(
        model=request.model,
        messages=messages,
        stream=True,
        options=options,
        tools=[tool_to_wire(t) for t in tools] or None,
        format=_response_format(request.response_format),
        keep_alive=extra_keep_alive if extra_keep_alive is not None else keep_alive,
        think=request.think,
        truncate=False,
    )


def _response_format(value: object) -> str | dict[str, Any] | None:
    if value is None or value == "":
        return None
    if value == "json":
        return "json"
    if isinstance(value, dict):
        return value
    raise InvalidRequestError(
        f"response_format must be 'json' or a JSON Schema object, not {value!r}."
    )


# -- model reports ---------------------------------------------------------------------


def parse_parameters(text: str | None) -> list[tuple[str, str]]:
    """The ``key value`` lines of ``/api/show`` ``parameters``, values unquoted.

    A key may repeat (``stop`` usually does); quoted values are JSON-like strings.
    """
    pairs: list[tuple[str, str]] = []
    for line in (text or "").splitlines():
        key, _, value = line.strip().partition(" ")
        value = value.strip()
        if not key:
            continue
        if len(value) >= 2 and value[0] == value[-1] == '"':
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):
                value = value[1:-1]
        pairs.append((key, value))
    return pairs


def capabilities_from(
    names: Sequence[str] | None,
    context_window: int | None = None,
    max_context_window: int | None = None,
) -> ModelCapabilities:
    """``/api/show`` ``capabilities`` as ollm's; an absent list means unknown, not none."""
    # A model that writes text calls tools through json-react when it has no native tools
    # (or refuses them, its capabilities unknown or wrong): each step is kept to its JSON
    # Schema by ``format``.
    if names is None:
        return ModelCapabilities(
            context_window=context_window,
            max_context_window=max_context_window,
            tool_strategy="json-react",
        )
    have = frozenset(names)
    return ModelCapabilities(
        tools="tools" in have,
        vision="vision" in have,
        thinking="thinking" in have,
        embedding="embedding" in have,
        completion="completion" in have,
        context_window=context_window,
        max_context_window=max_context_window,
        tool_strategy="json-react" if "completion" in have else None,
    )
