"""Ollama's native wire (``/api/chat`` and friends): requests read into a ``ChatJob``,
replies written as NDJSON chunks (see ollama-wire.md for the server's own shapes)."""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

import ollm
from ollm.kit import new_call_id
from ollm_serve._backend import ChatJob, Done
from ollm_serve._errors import Refused
from ollm_serve._openai import read_tools

__all__ = [
    "VERSION",
    "chat_chunk",
    "error_body",
    "final_chunk",
    "model_entry",
    "read_chat",
    "read_embed",
]

# The Ollama version whose API these endpoints follow (clients compare it for features).
VERSION = "0.12.6"


def error_body(refused: Refused) -> bytes:
    """Ollama's error shape: ``{"error": "..."}``."""
    return msgspec.json.encode({"error": refused.message})


def read_chat(body: Mapping[str, Any]) -> tuple[ChatJob, bool]:
    """The job of an ``/api/chat`` body and whether it streams (Ollama's default: yes)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Refused(400, "model is required")
    raw = body.get("messages")
    if not isinstance(raw, list):
        raise Refused(400, "messages must be a list of messages")
    system, messages = _messages(raw)
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise Refused(400, "options must be an object")
    stop = options.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    predict = _option(options, "num_predict", int)
    job = ChatJob(
        model=model,
        messages=messages,
        system=system,
        tools=read_tools(body.get("tools")),
        options=ollm.GenerationOptions(
            temperature=_option(options, "temperature", float),
            top_p=_option(options, "top_p", float),
            top_k=_option(options, "top_k", int),
            seed=_option(options, "seed", int),
            repeat_penalty=_option(options, "repeat_penalty", float),
            # -1 and -2 are Ollama's "no limit" and "fill the context".
            max_tokens=predict if predict is not None and predict > 0 else None,
            stop=tuple(str(s) for s in stop) if isinstance(stop, list) and stop else None,
            context_window=_option(options, "num_ctx", int),
        ),
        schema=_format(body.get("format")),
        think=body.get("think") if isinstance(body.get("think"), (bool, str)) else None,
    )
    stream = body.get("stream", True)
    if not isinstance(stream, bool):
        raise Refused(400, "stream must be true or false")
    return job, stream


def _option(options: Mapping[str, Any], name: str, kind: type) -> Any:
    value = options.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refused(400, f"option {name} must be a number")
    if kind is int and value != int(value):
        raise Refused(400, f"option {name} must be a whole number")
    return kind(value)


def _messages(raw: list[Any]) -> tuple[str | None, list[ollm.Message]]:
    system: list[str] = []
    messages: list[ollm.Message] = []
    pending: list[ollm.ToolCall] = []  # the last reply's calls, answered in order
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise Refused(400, f"messages[{index}] must be an object")
        role = item.get("role")
        content = item.get("content") or ""
        if not isinstance(content, str):
            raise Refused(400, f"messages[{index}].content must be a string")
        if role == "system":
            system.append(content)
        elif role == "user":
            messages.append(ollm.Message.user(content, images=_images(item.get("images"), index)))
        elif role == "assistant":
            pending = _calls(item.get("tool_calls"), index)
            messages.append(
                ollm.Message.assistant(
                    content, tool_calls=tuple(pending), thinking=item.get("thinking")
                )
            )
        elif role == "tool":
            # Ollama's tool messages name the tool (tool_name), not the call: each answers
            # the first unanswered call of that name (or the first one left).
            name = item.get("tool_name") or item.get("name")
            ident = item.get("tool_call_id")
            call = next(
                (c for c in pending if c.id == ident or (not ident and c.name == name)), None
            )
            call = call or (
                pending[0] if pending else ollm.ToolCall(new_call_id(), str(name or "tool"))
            )
            if call in pending:
                pending.remove(call)
            messages.append(ollm.Message.tool(content, call=call))
        else:
            raise Refused(400, f"messages[{index}].role must be system, user, assistant or tool")
    return ("\n\n".join(system) if system else None), messages


def _images(raw: Any, index: int) -> tuple[ollm.ImagePart, ...]:
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise Refused(400, f"messages[{index}].images must be a list of base64 strings")
    try:
        return tuple(ollm.ImagePart(base64.b64decode(i, validate=True)) for i in raw)
    except (binascii.Error, ValueError, TypeError):
        raise Refused(400, f"messages[{index}].images: an image is not valid base64") from None


def _calls(raw: Any, index: int) -> list[ollm.ToolCall]:
    if not raw:
        return []
    if not isinstance(raw, list):
        raise Refused(400, f"messages[{index}].tool_calls must be a list")
    calls = []
    for item in raw:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise Refused(400, f"messages[{index}].tool_calls: each needs a function with a name")
        args = function.get("arguments") or {}
        ident = item.get("id") or new_call_id()
        if isinstance(args, dict):
            calls.append(ollm.ToolCall(ident, function["name"], args))
        else:
            calls.append(ollm.ToolCall(ident, function["name"], invalid_args=str(args)))
    return calls


def _format(raw: Any) -> dict[str, Any] | None:
    if raw is None or raw == "":
        return None
    if raw == "json":
        return {"type": "object"}
    if isinstance(raw, dict):
        return raw
    raise Refused(400, 'format must be "json" or a JSON Schema object')


def read_embed(body: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The model and texts of an ``/api/embed`` body."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Refused(400, "model is required")
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise Refused(400, "input must be a string or a non-empty list of strings")
    return model, texts


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _calls_body(calls: tuple[ollm.ToolCall, ...]) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "function": {"index": i, "name": c.name, "arguments": c.args}}
        for i, c in enumerate(calls)
    ]


def chat_chunk(model: str, text: str = "", thinking: str = "") -> bytes:
    """One NDJSON line of a streamed reply."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if thinking:
        message["thinking"] = thinking
    body = {"model": model, "created_at": _now(), "message": message, "done": False}
    return msgspec.json.encode(body) + b"\n"


def final_chunk(
    model: str, done: Done, started: float, text: str = "", thinking: str = ""
) -> bytes:
    """The last line (``done: true``), with the reply's tool calls and counts; the whole
    reply when ``text`` is given (``"stream": false``)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if thinking:
        message["thinking"] = thinking
    if done.tool_calls:
        message["tool_calls"] = _calls_body(done.tool_calls)
    usage = done.usage or ollm.Usage()
    body = {
        "model": model,
        "created_at": _now(),
        "message": message,
        "done": True,
        # No "tool_calls" reason on Ollama's own API: a reply that called tools stops.
        "done_reason": "length" if done.reason == "length" else "stop",
        "total_duration": int((time.perf_counter() - started) * 1e9),
        "prompt_eval_count": usage.prompt_tokens,
        "eval_count": usage.completion_tokens,
    }
    return msgspec.json.encode(body) + b"\n"


def model_entry(info: ollm.ModelInfo, name: str) -> dict[str, Any]:
    """One model of ``/api/tags``."""
    modified = info.modified_at.isoformat() if info.modified_at else "1970-01-01T00:00:00Z"
    return {
        "name": name,
        "model": name,
        "modified_at": modified,
        "size": info.size_bytes or 0,
        "digest": info.digest or "",
        "details": details(info),
    }


def details(info: ollm.ModelInfo) -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": info.format or "",
        "family": info.family or "",
        "families": [info.family] if info.family else None,
        "parameter_size": info.parameter_size or "",
        "quantization_level": info.quantization or "",
    }
