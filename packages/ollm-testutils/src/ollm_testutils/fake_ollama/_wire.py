"""The Ollama wire format, as the fake server writes and reads it (see ollama-wire.md).

Response shapes are msgspec Structs whose field order and omissions follow the Go
structs of ``api/types.go`` (``omitempty`` fields are left out when empty). Request
shapes are lenient, like Go's decoder: unknown fields are ignored and ``null`` leaves
a field unset; a wrong type becomes Go's own error text.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any, TypeVar

import msgspec

__all__ = [
    "ChatChunk",
    "ChatRequest",
    "ErrorBody",
    "WireFunction",
    "WireMessage",
    "WireToolCall",
    "canonical_name",
    "decode_request",
    "go_duration",
    "go_json",
    "local_timestamp",
    "normalized_name",
    "utc_timestamp",
    "valid_name",
]


# -- what the server writes -----------------------------------------------------------

_encoder = msgspec.json.Encoder()
# Go's encoding/json escapes these inside strings (HTML safety and JSONP), and they
# only ever occur inside strings, so a byte replacement is exact.
_GO_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def go_json(value: object) -> bytes:
    """``value`` as JSON, byte for byte as Go's ``json.Marshal`` writes it."""
    data = _encoder.encode(value)
    for raw, escaped in _GO_ESCAPES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


class WireFunction(msgspec.Struct, kw_only=True, omit_defaults=True):
    index: int | None = None
    name: str
    arguments: Any


class WireToolCall(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str | None = None
    function: WireFunction


class WireMessage(msgspec.Struct, kw_only=True, omit_defaults=True):
    role: str
    content: str
    thinking: str | None = None
    tool_calls: list[WireToolCall] | None = None


class ChatChunk(msgspec.Struct, kw_only=True, omit_defaults=True):
    model: str
    created_at: str
    message: WireMessage
    done_reason: str | None = None
    done: bool
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None


class ErrorBody(msgspec.Struct):
    error: str


# -- what the server reads ------------------------------------------------------------


class InFunction(msgspec.Struct):
    name: str | None = None
    arguments: dict[str, Any] | None = None
    index: int | None = None


class InToolCall(msgspec.Struct):
    id: str | None = None
    function: InFunction | None = None


class InMessage(msgspec.Struct):
    role: str | None = None
    content: str | None = None
    images: list[str] | None = None
    thinking: str | None = None
    tool_calls: list[InToolCall] | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None


class InTool(msgspec.Struct):
    type: str | None = None
    function: dict[str, Any] | None = None


class ChatRequest(msgspec.Struct):
    model: str | None = None
    messages: list[InMessage] | None = None
    tools: list[InTool] | None = None
    stream: bool | None = None
    think: Any = None
    format: Any = None
    options: dict[str, Any] | None = None
    keep_alive: Any = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    truncate: bool | None = None


_GO_TYPES = {
    "messages": "[]api.Message",
    "messages.tool_calls": "[]api.ToolCall",
    "messages.tool_calls.function": "api.ToolCallFunction",
    "messages.tool_calls.function.arguments": "api.ToolCallFunctionArguments",
    "messages.images": "api.ImageData",
    "tools": "api.Tools",
    "options": "map[string]interface {}",
    "input": "interface {}",
}
_GO_KINDS = {
    "str": "string",
    "int": "number",
    "float": "number",
    "bool": "bool",
    "array": "array",
    "object": "object",
}
_GO_EXPECTED = {
    "str": "string",
    "int": "int",
    "float": "float64",
    "bool": "bool",
    "array": "[]interface {}",
    "object": "map[string]interface {}",
}
_VALIDATION = re.compile(
    r"Expected `(?P<expected>[^`]+)`, got `(?P<got>\w+)`(?: - at `\$(?P<path>[^`]*)`)?"
)
_MALFORMED = re.compile(r"\(byte (\d+)\)")


class WireError(Exception):
    """A request the server rejects: ``status`` and the ``error`` text."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


T = TypeVar("T")


def decode_request(body: bytes, kind: type[T], go_name: str) -> T:
    """Decode a request body as Go's ``ShouldBindJSON`` would, with Go's error texts."""
    if not body.strip():
        raise WireError(400, "missing request body")
    try:
        raw = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(400, _syntax_error(body, str(exc))) from None
    if raw is None:
        return kind()
    if not isinstance(raw, dict):
        got = _GO_KINDS.get(_kind(raw), "value")
        raise WireError(400, f"json: cannot unmarshal {got} into Go value of type api.{go_name}")
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        raise WireError(400, _type_error(str(exc), go_name)) from None


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "array"
    return "object"


def _syntax_error(body: bytes, message: str) -> str:
    if "truncated" in message:
        return "unexpected EOF"
    match = _MALFORMED.search(message)
    if match:
        position = int(match.group(1))
        char = body[position : position + 1].decode("latin-1") or " "
        return f"invalid character {char!r} looking for beginning of value"
    return message


def _type_error(message: str, go_name: str) -> str:
    match = _VALIDATION.search(message)
    if not match:
        return f"json: {message}"
    got = _GO_KINDS.get(match.group("got"), match.group("got"))
    raw_path = (match.group("path") or "").lstrip(".")
    path = re.sub(r"\[[^\]]*\]", "", raw_path).replace("..", ".").strip(".")
    expected = match.group("expected").split(" | ")[0]
    go_type = _GO_TYPES.get(path) or _GO_EXPECTED.get(expected, expected)
    if path == "messages.images" and not raw_path.endswith("]"):
        go_type = "[]api.ImageData"
    return f"json: cannot unmarshal {got} into Go struct field {go_name}.{path} of type {go_type}"


# -- names, times, durations -----------------------------------------------------------

_DEFAULT_HOST = "registry.ollama.ai"
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$")


def _split(name: str) -> tuple[str, str, str, str]:
    """(host, namespace, model, tag) of a name, with Ollama's defaults filled in."""
    rest, tag = name, "latest"
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        rest, tag = name[:colon], name[colon + 1 :]
    parts = rest.split("/")
    if len(parts) == 1:
        return _DEFAULT_HOST, "library", parts[0], tag
    if len(parts) == 2:
        return _DEFAULT_HOST, parts[0], parts[1], tag
    return parts[-3], parts[-2], parts[-1], tag


def valid_name(name: str) -> bool:
    """Whether Ollama would accept ``name`` as a model name."""
    if not name or name != name.strip():
        return False
    host, namespace, model, tag = _split(name)
    if name.count("/") > 2:
        return False
    return bool(_PART.match(model) and _PART.match(namespace) and _TAG.match(tag) and host)


def canonical_name(name: str) -> str:
    """``registry.ollama.ai/library/llama3.2:latest``, as capability errors show it."""
    host, namespace, model, tag = _split(name)
    return f"{host}/{namespace}/{model}:{tag}"


def normalized_name(name: str) -> str:
    """``llama3.2:latest``: the short form ``/api/tags`` and ``/api/show`` use."""
    host, namespace, model, tag = _split(name)
    if host != _DEFAULT_HOST:
        return f"{host}/{namespace}/{model}:{tag}"
    if namespace != "library":
        return f"{namespace}/{model}:{tag}"
    return f"{model}:{tag}"


def utc_timestamp(ns: int | None = None) -> str:
    """RFC 3339 in UTC with Go's trimmed nanoseconds (``2025-07-07T20:22:19.184789Z``)."""
    ns = time.time_ns() if ns is None else ns
    seconds, fraction = divmod(ns, 1_000_000_000)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    digits = f"{fraction:09d}".rstrip("0")
    return f"{stamp}.{digits}Z" if digits else f"{stamp}Z"


def local_timestamp(moment: datetime | None = None) -> str:
    """RFC 3339 in the machine's offset, as ``modified_at`` and ``expires_at`` are."""
    moment = (moment or datetime.now(UTC)).astimezone()
    text = moment.isoformat(timespec="microseconds")
    if text.endswith("+00:00"):
        text = text[:-6] + "Z"
    return text


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(value: object) -> float | None:
    """Seconds of a ``keep_alive`` (a number of seconds or a Go duration string).

    ``None`` when not given; raises ``WireError`` for what the server rejects.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise WireError(400, "json: cannot unmarshal bool into Go value of type api.Duration")
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        go_type = "[]interface {}" if isinstance(value, list) else "map[string]interface {}"
        raise WireError(400, f"Unsupported type: '{go_type}'")
    text = value.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    total, position = 0.0, 0
    for match in _DURATION_PART.finditer(body):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if not body or position != len(body):
        unit = "missing unit in" if body.replace(".", "").isdigit() else "invalid"
        raise WireError(400, f'time: {unit} duration "{value}"')
    return sign * total
