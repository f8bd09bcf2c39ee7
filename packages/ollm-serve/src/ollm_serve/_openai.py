"""OpenAI's Chat Completions wire: requests read into a ``ChatJob``, replies written as
``chat.completion`` objects or ``chat.completion.chunk`` server-sent events."""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import struct
import time
from collections.abc import Mapping
from typing import Any

import msgspec

import ollm
from ollm.kit import new_call_id
from ollm_serve._backend import ChatJob, Done
from ollm_serve._errors import Refused

__all__ = [
    "chunk",
    "completion",
    "error_body",
    "read_chat",
    "read_embeddings",
    "read_tools",
    "usage_body",
]

# What ollm.Tool takes as a name (OpenAI's own rule, with '.').
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls"}
# OpenAI's error types by status.
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def error_body(refused: Refused) -> bytes:
    """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    kind = _TYPES.get(refused.status, "server_error" if refused.status >= 500 else "api_error")
    return msgspec.json.encode(
        {
            "error": {
                "message": refused.message,
                "type": kind,
                "param": refused.param,
                "code": refused.code,
            }
        }
    )


def _expect(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = body.get(name)
    # JSON's true is no number: bool is int's subclass in Python.
    if value is not None and (
        isinstance(value, bool) != (kind is bool) or not isinstance(value, kind)
    ):
        raise Refused(400, f"{name} must be {what}, not {json.dumps(value)[:80]}.", param=name)
    return value


def read_chat(body: Mapping[str, Any]) -> tuple[ChatJob, bool, bool]:
    """The job of a ``/v1/chat/completions`` body, whether it streams, and whether the
    stream ends with a usage chunk (``stream_options.include_usage``)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Refused(
            400,
            "model is required: the name of a model (GET /v1/models lists them).",
            param="model",
        )
    n = _expect(body, "n", int, "a whole number")
    if n is not None and n != 1:
        raise Refused(
            400,
            f"n={n} is not supported: ollm serve returns one choice per request. Send n "
            "separate requests (with different seeds for different answers).",
            param="n",
        )
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise Refused(400, "messages must be a non-empty list of messages.", param="messages")
    system, messages = _messages(raw)
    max_tokens = _expect(body, "max_completion_tokens", int, "a whole number")
    if max_tokens is None:
        max_tokens = _expect(body, "max_tokens", int, "a whole number")
    if max_tokens is not None and max_tokens < 1:
        raise Refused(400, "max_tokens must be at least 1.", param="max_tokens")
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise Refused(400, "stop must be a string or a list of strings.", param="stop")
    options = ollm.GenerationOptions(
        temperature=_number(body, "temperature"),
        top_p=_number(body, "top_p"),
        max_tokens=max_tokens,
        seed=_expect(body, "seed", int, "a whole number"),
        stop=tuple(stop) if stop else None,
    )
    stream = _expect(body, "stream", bool, "true or false") or False
    stream_options = _expect(body, "stream_options", dict, "an object") or {}
    effort = _expect(body, "reasoning_effort", str, "a string")
    job = ChatJob(
        model=model,
        messages=messages,
        system=system,
        tools=read_tools(body.get("tools")),
        tool_choice=_tool_choice(body.get("tool_choice")),
        options=options,
        schema=_schema(body.get("response_format")),
        think=effort,
    )
    if job.tool_choice == "none":
        job.tools = ()
        job.tool_choice = "auto"
    return job, stream, bool(stream_options.get("include_usage"))


def _number(body: Mapping[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refused(400, f"{name} must be a number.", param=name)
    return float(value)


def _messages(raw: list[Any]) -> tuple[str | None, list[ollm.Message]]:
    system: list[str] = []
    messages: list[ollm.Message] = []
    names: dict[str, str] = {}  # a call's id to its tool's name, for the results
    for index, item in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(item, dict):
            raise Refused(400, f"{where} must be an object.", param=where)
        role = item.get("role")
        text, images = _content(item.get("content"), where)
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            messages.append(ollm.Message.user(text, images=images))
        elif role == "assistant":
            calls = _calls(item.get("tool_calls"), where)
            names.update((c.id, c.name) for c in calls)
            messages.append(ollm.Message.assistant(text, tool_calls=calls))
        elif role == "tool":
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise Refused(
                    400, f"{where}.tool_call_id is required for a tool message.", param=where
                )
            name = names.get(call_id) or item.get("name") or "tool"
            messages.append(ollm.Message.tool(text, call=ollm.ToolCall(call_id, str(name))))
        else:
            raise Refused(
                400,
                f"{where}.role must be system, developer, user, assistant or tool, not {role!r}.",
                param=where,
            )
    return ("\n\n".join(system) if system else None), messages


def _content(content: Any, where: str) -> tuple[str, tuple[ollm.ImagePart, ...]]:
    if content is None:
        return "", ()
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        raise Refused(400, f"{where}.content must be a string or a list of parts.", param=where)
    texts: list[str] = []
    images: list[ollm.ImagePart] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            images.append(_image(url, where))
        else:
            raise Refused(
                400,
                f"{where}.content has a part of type {kind!r}: send text or image_url parts.",
                param=where,
            )
    return "\n".join(texts), tuple(images)


def _image(url: str, where: str) -> ollm.ImagePart:
    # Only inline images: fetching a URL the client names would make the server a proxy
    # into its own network.
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        raise Refused(
            400,
            f"{where}: an image must be a data: URL (data:image/png;base64,...); ollm serve "
            "does not fetch images from the network.",
            param=where,
        )
    head, data = url[5:].split(";base64,", 1)
    try:
        return ollm.ImagePart(base64.b64decode(data, validate=True), head or "image/png")
    except (binascii.Error, ValueError):
        raise Refused(400, f"{where}: the image's base64 data is not valid.", param=where) from None


def _calls(raw: Any, where: str) -> tuple[ollm.ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise Refused(400, f"{where}.tool_calls must be a list.", param=where)
    calls = []
    for item in raw:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise Refused(
                400, f"{where}.tool_calls: each needs a function with a name.", param=where
            )
        arguments = function.get("arguments") or "{}"
        call_id = item.get("id") or new_call_id()
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            args = None
        if isinstance(args, dict):
            calls.append(ollm.ToolCall(call_id, function["name"], args))
        else:
            calls.append(ollm.ToolCall(call_id, function["name"], invalid_args=str(arguments)))
    return tuple(calls)


def read_tools(raw: Any) -> tuple[ollm.ToolSchema, ...]:
    """The tools of a request (OpenAI's shape, which Ollama's is too)."""
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise Refused(400, "tools must be a list.", param="tools")
    tools = []
    for index, item in enumerate(raw):
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            function = {}
        name = function.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise Refused(
                400,
                f"tools[{index}] needs a function with a name of 1 to 64 letters, digits, "
                "'_', '-' or '.'.",
                param=f"tools[{index}]",
            )
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise Refused(
                400,
                f"tools[{index}].function.parameters must be a JSON Schema object.",
                param=f"tools[{index}]",
            )
        tools.append(ollm.ToolSchema(name, str(function.get("description") or ""), parameters))
    return tuple(tools)


def _tool_choice(raw: Any) -> str:
    if raw is None:
        return "auto"
    if raw in ("auto", "none", "required"):
        return str(raw)
    if isinstance(raw, dict):
        name = (raw.get("function") or {}).get("name")
        if isinstance(name, str) and name:
            return name
    raise Refused(
        400,
        'tool_choice must be "auto", "none", "required" or {"type": "function", '
        '"function": {"name": ...}}.',
        param="tool_choice",
    )


def _schema(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        schema = (raw.get("json_schema") or {}).get("schema")
        if isinstance(schema, dict):
            return schema
        raise Refused(
            400,
            "response_format.json_schema.schema must be a JSON Schema object.",
            param="response_format",
        )
    raise Refused(
        400,
        'response_format.type must be "text", "json_object" or "json_schema".',
        param="response_format",
    )


def read_embeddings(body: Mapping[str, Any]) -> tuple[str, list[str], bool]:
    """The model and texts of a ``/v1/embeddings`` body, and whether the vectors go as
    base64 (the SDK's default: little-endian float32s)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Refused(400, "model is required.", param="model")
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise Refused(400, "input must be a string or a non-empty list of strings.", param="input")
    encoding = body.get("encoding_format")
    if encoding not in (None, "float", "base64"):
        raise Refused(400, 'encoding_format must be "float" or "base64".', param="encoding_format")
    return model, texts, encoding == "base64"


def vector(values: list[float], as_base64: bool) -> list[float] | str:
    """An embedding as the client asked for it."""
    if not as_base64:
        return values
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode("ascii")


def new_id() -> str:
    """A completion's id, as OpenAI's look."""
    return f"chatcmpl-{os.urandom(12).hex()}"


def usage_body(usage: ollm.Usage | None) -> dict[str, int]:
    usage = usage or ollm.Usage()
    total = usage.total_tokens or usage.prompt_tokens + usage.completion_tokens
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": total,
    }


def tool_calls_body(
    calls: tuple[ollm.ToolCall, ...], *, indexed: bool = False
) -> list[dict[str, Any]]:
    body = []
    for index, call in enumerate(calls):
        item: dict[str, Any] = {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.args, ensure_ascii=False)},
        }
        if indexed:
            item["index"] = index
        body.append(item)
    return body


def completion(ident: str, model: str, text: str, thinking: str, done: Done) -> bytes:
    """A whole ``chat.completion``."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if done.tool_calls:
        message["tool_calls"] = tool_calls_body(done.tool_calls)
    if thinking:
        message["reasoning_content"] = thinking
    return msgspec.json.encode(
        {
            "id": ident,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": _FINISH.get(done.reason, "stop"),
                    "logprobs": None,
                }
            ],
            "usage": usage_body(done.usage),
        }
    )


def chunk(
    ident: str,
    created: int,
    model: str,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    usage: ollm.Usage | None = None,
) -> bytes:
    """One server-sent event of a streamed completion (``delta`` ``None``: the usage
    chunk, with no choices)."""
    body: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
    }
    if delta is None:
        body["choices"] = []
        body["usage"] = usage_body(usage)
    else:
        body["choices"] = [
            {
                "index": 0,
                "delta": delta,
                "finish_reason": _FINISH.get(finish, "stop") if finish else None,
                "logprobs": None,
            }
        ]
    return b"data: " + msgspec.json.encode(body) + b"\n\n"
