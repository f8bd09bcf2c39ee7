"""ollm's requests as Messages API bodies (WIRE.md, "Requests").

- The system prompt is the top-level ``system``; messages alternate ``user`` and
  ``assistant``, consecutive messages of one role sharing one message (a reply's
  parallel calls are answered by one user message of ``tool_result`` blocks, in order).
- An assistant's calls are ``tool_use`` blocks; the ``thinking`` and
  ``redacted_thinking`` blocks of the reply that made them travel with its first call
  (``ToolCall.signature``, opaque to everyone else) and go back first in the message,
  byte for byte: the API checks their signatures when a tool loop continues.
- A tool's result is a ``tool_result`` block with ``is_error`` for a failure; its images
  go inside it. Images are base64 ``image`` blocks.
- ``max_tokens`` is required: the request's, else the provider's setting, else the
  model's default (``default_max_tokens``); thinking adds its budget on top.
- Typed output is a tool whose input schema is the output's schema, forced with
  ``tool_choice`` (``OUTPUT_TOOL``); the chat loop gives its input back as the reply's text.
- ``prompt_cache`` puts ``cache_control`` on the system prompt, the last tool and the
  last block of the conversation: each request then reads what the last one wrote.
"""

from __future__ import annotations

import base64
import re
from typing import Any

import msgspec

from ollm.errors import InvalidRequestError
from ollm.kit import output_tool_parameters
from ollm.types import ImagePart, Message, ProviderRequest, TextPart, ToolCall, ToolSchema
from ollm_http import option_number, stop_sequences

__all__ = [
    "BUDGETS",
    "OUTPUT_TOOL",
    "THINKING_KEY",
    "build_body",
    "default_max_tokens",
    "messages_of",
    "thinking_blocks",
    "tools_of",
]

# The tool whose input is the typed output (a name no user tool is likely to have).
OUTPUT_TOOL = "ollm_output"
# The key under which a reply's thinking blocks ride on its first call's signature.
THINKING_KEY = "anthropic_thinking"
# Thinking budgets by level (the API's least is 1,024 tokens).
BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
_THINK_ON = "medium"
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_EPHEMERAL = {"type": "ephemeral"}
_encode = msgspec.json.encode
_decode = msgspec.json.decode


def default_max_tokens(model: str) -> int:
    """The reply's limit when nothing sets one: 4,096 for the Claude 3 models whose
    output stops there (Haiku, Sonnet and Opus 3), 8,192 for every other model."""
    name = model.rpartition("/")[2]
    if name.startswith("claude-3-") and not name.startswith(("claude-3-5", "claude-3-7")):
        return 4096
    return 8192


def thinking_blocks(call: ToolCall) -> list[dict[str, Any]]:
    """The thinking blocks a reply's first call carries (none for any other signature)."""
    signature = call.signature
    if not signature or not signature.startswith('{"' + THINKING_KEY):
        return []
    try:
        value = _decode(signature)
    except msgspec.DecodeError:
        return []
    blocks = value.get(THINKING_KEY) if isinstance(value, dict) else None
    return [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []


def _image(part: ImagePart) -> dict[str, Any]:
    if part.mime_type not in _IMAGE_TYPES:
        raise InvalidRequestError(
            f"An image of type {part.mime_type!r} cannot be sent to the Messages API, which "
            "takes JPEG, PNG, GIF and WebP. Convert the image to one of them."
        )
    data = base64.b64encode(part.data).decode("ascii")
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.mime_type, "data": data},
    }


def _blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            # The API refuses an empty text block.
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        else:
            blocks.append(_image(part))
    return blocks


def _assistant(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.tool_calls:
        blocks.extend(thinking_blocks(message.tool_calls[0]))
    blocks.extend(_blocks(message))
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.args})
    return blocks


def _result(message: Message) -> dict[str, Any]:
    images = [_image(p) for p in message.parts if isinstance(p, ImagePart)]
    text = message.text
    content: Any = text
    if images:
        content = [{"type": "text", "text": text}] if text else []
        content.extend(images)
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": content,
    }
    if message.is_error:
        block["is_error"] = True
    return block


def messages_of(request: ProviderRequest) -> list[dict[str, Any]]:
    """The request's messages as ``messages`` (roles alternate; none is empty)."""
    out: list[dict[str, Any]] = []
    for message in request.messages:
        role = message.role
        if role == "assistant":
            blocks, side = _assistant(message), "assistant"
        elif role == "tool" and message.tool_call_id is not None:
            blocks, side = [_result(message)], "user"
        else:
            # user, a system message in the history, a strategy's results written as text.
            blocks, side = _blocks(message), "user"
        if not blocks:
            continue
        if out and out[-1]["role"] == side:
            last = out[-1]["content"]
            # Results answer the calls first: they lead the user message they join.
            if blocks[0]["type"] == "tool_result":
                at = sum(1 for b in last if b["type"] == "tool_result")
                last[at:at] = blocks
            else:
                last.extend(blocks)
        else:
            out.append({"role": side, "content": blocks})
    return out


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise InvalidRequestError(
            f"The tool {name!r} cannot be offered through the Messages API: a tool's name "
            "holds 1 to 64 letters, digits, '_' or '-'. Rename it."
        )


def tools_of(tools: tuple[ToolSchema, ...]) -> list[dict[str, Any]]:
    """The offered tools as ``tools`` (``input_schema`` is their JSON Schema)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        _check_name(tool.name)
        schema = tool.parameters or {"type": "object", "properties": {}}
        if schema.get("type") != "object":
            raise InvalidRequestError(
                f"The parameters of the tool {tool.name!r} are not an object schema; the "
                "Messages API takes a tool's input as an object of named fields."
            )
        entry: dict[str, Any] = {"name": tool.name, "input_schema": schema}
        if tool.description:
            entry["description"] = tool.description
        out.append(entry)
    return out


def _tool_choice(choice: str, tools: tuple[ToolSchema, ...]) -> dict[str, Any] | None:
    if choice == "auto":
        return None
    if choice == "none":
        return {"type": "none"}
    if choice == "required":
        return {"type": "any"}
    if any(tool.name == choice for tool in tools):
        return {"type": "tool", "name": choice}
    raise InvalidRequestError(
        f"tool_choice {choice!r} is none of 'auto', 'none', 'required' or the name of an "
        f"offered tool ({', '.join(t.name for t in tools) or 'none is offered'})."
    )


def _budget(think: bool | str | None) -> int | None:
    if think is None or think is False:
        return None
    level = _THINK_ON if think is True else str(think).lower()
    if level not in BUDGETS:
        raise InvalidRequestError(
            f"The thinking level {think!r} is not one ollm knows for the Messages API: use "
            f"{', '.join(BUDGETS)}, on or off."
        )
    return BUDGETS[level]


def output_schema(value: object) -> tuple[dict[str, Any], bool] | None:
    """The output tool's input schema for ``response_format``, and whether the value is
    wrapped in ``{"value": ...}`` (a tool's input must be an object); ``None`` for none."""
    if value is None or value == "":
        return None
    if value == "json":
        return {"type": "object"}, False
    if isinstance(value, dict):
        return output_tool_parameters(value)
    raise InvalidRequestError(
        f"response_format must be 'json' or a JSON Schema object, not {value!r}."
    )


def build_body(
    request: ProviderRequest,
    *,
    max_tokens: int | None = None,
    prompt_cache: bool = False,
    stream: bool = True,
) -> dict[str, Any]:
    """The ``/v1/messages`` body for ``request`` (``max_tokens``: the provider's setting)."""
    messages = messages_of(request)
    if not messages:
        raise InvalidRequestError(
            "The request has no message with content to send: the Messages API needs one."
        )
    options = request.options
    budget = _budget(request.think)
    if options.max_tokens is not None:
        limit = option_number("max_tokens", options.max_tokens, integer=True)
        if budget is not None and limit <= budget:
            raise InvalidRequestError(
                f"max_tokens ({limit}) must be more than the thinking budget ({budget} "
                f"tokens, think={request.think!r}): raise it, or think at a lower level."
            )
    else:
        limit = (max_tokens or default_max_tokens(request.model)) + (budget or 0)
    body: dict[str, Any] = {"model": request.model, "max_tokens": limit, "messages": messages}
    if request.system_prompt:
        body["system"] = request.system_prompt
    tools = tools_of(request.tools) if request.tools else []
    choice = _tool_choice(request.tool_choice, request.tools) if request.tools else None
    if budget is not None and choice is not None and choice["type"] in ("any", "tool"):
        # The API refuses the pair; said here, before anything is sent.
        raise InvalidRequestError(
            f"tool_choice {request.tool_choice!r} forces a tool, which the Messages API does "
            "not allow while the model thinks. Use tool_choice 'auto', or turn thinking off."
        )
    output = output_schema(request.response_format)
    if output is not None:
        tools.append(
            {
                "name": OUTPUT_TOOL,
                "description": "Give the answer: its input is the whole answer.",
                "input_schema": output[0],
            }
        )
        # Thinking may not be combined with a forced tool; nor are the user's tools
        # taken away: then the instructions in the system prompt ask for it.
        if budget is None and not request.tools:
            choice = {"type": "tool", "name": OUTPUT_TOOL}
    if tools:
        body["tools"] = tools
        if choice is not None:
            body["tool_choice"] = choice
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    if options.temperature is not None:
        body["temperature"] = option_number("temperature", options.temperature)
    if options.top_p is not None:
        body["top_p"] = option_number("top_p", options.top_p)
    if options.top_k is not None:
        body["top_k"] = option_number("top_k", options.top_k, integer=True)
    if options.stop is not None:
        items = stop_sequences(options.stop)
        if items:
            body["stop_sequences"] = items
    if stream:
        body["stream"] = True
    body.update(options.extra)
    if prompt_cache:
        _mark_cache(body)
    return body


def _mark_cache(body: dict[str, Any]) -> None:
    """``cache_control`` on the system prompt, the last tool and the conversation's end
    (three of the four breakpoints the API allows)."""
    system = body.get("system")
    if isinstance(system, str):
        body["system"] = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}]
    tools = body.get("tools")
    if tools:
        tools[-1] = {**tools[-1], "cache_control": _EPHEMERAL}
    last = body["messages"][-1]["content"]
    last[-1] = {**last[-1], "cache_control": _EPHEMERAL}


def count_body(request: ProviderRequest) -> dict[str, Any]:
    """The ``/v1/messages/count_tokens`` body: what the prompt is made of, no limits."""
    body = build_body(request, stream=False)
    return {k: v for k, v in body.items() if k in ("model", "messages", "system", "tools")} | (
        {"thinking": body["thinking"]} if "thinking" in body else {}
    )


def encode_thinking(blocks: list[dict[str, Any]]) -> str:
    """The thinking blocks of a reply as its first call's signature (JSON, kept as is)."""
    return _encode({THINKING_KEY: blocks}).decode()
