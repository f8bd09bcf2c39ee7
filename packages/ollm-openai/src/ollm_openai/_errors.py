"""The failures of OpenAI-compatible servers as ollm's typed errors, each with a next step.

Servers word their errors differently (OpenAI's ``code``, vLLM's ``BadRequestError``,
llama.cpp's ``exceed_context_size_error``, a proxy's HTML page), so decisions rest on
the status code first and on a few well-known phrases second; the server's own words
are always quoted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from ollm.errors import (
    AuthenticationError,
    ContextExceededError,
    InvalidRequestError,
    ModelNotFoundError,
    OllmError,
    ProviderError,
    RateLimitedError,
    ToolsUnsupportedError,
)
from ollm.kit import excerpt, quote
from ollm_http import decode_json, is_rate_limited, retry_after_seconds
from ollm_openai._config import OpenAIConfig
from ollm_openai._wire import ErrorBody

__all__ = [
    "PROVIDER",
    "Refusal",
    "error_from_reply",
    "error_from_value",
    "error_value",
    "parse_error",
]

PROVIDER = "openai"

# How servers say that tools cannot be used (vLLM without a tool parser, llama.cpp
# without --jinja, Ollama's /v1 for a model without tools, LM Studio, SGLang).
_NO_TOOLS = (
    "enable-auto-tool-choice",
    "tool-call-parser",
    "does not support tools",
    "tools param requires --jinja",
    "tools are not supported",
    "tool use is not supported",
    "does not support function calling",
    "tool_choice is not supported",
)
_CONTEXT = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "context size",
    "context window",
    "exceed_context_size",
    "too many tokens",
    "prompt is too long",
    # vLLM: "The decoder prompt (length 9000) is longer than the maximum model length of 4096"
    "maximum model length",
    "longer than the maximum",
)


@dataclass(frozen=True)
class Refusal:
    """What a server said about a failure: status, message, and OpenAI's ``type``/``code``."""

    status: int | None
    message: str
    type: str | None = None
    code: str | None = None
    param: str | None = None

    def mentions(self, *phrases: str) -> bool:
        """Whether the message, code, type or param contains one of ``phrases``."""
        text = " ".join(
            str(part) for part in (self.message, self.code, self.type, self.param) if part
        ).lower()
        return any(phrase in text for phrase in phrases)


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value.strip() or None
    if value is None:
        return None
    return quote(msgspec.json.encode(value).decode())


def error_value(value: Any, status: int | None = None) -> Refusal:
    """A ``Refusal`` from the ``error`` member of a body (an object or a string)."""
    if isinstance(value, dict):
        code = value.get("code")
        number = code if isinstance(code, int) and not isinstance(code, bool) else None
        return Refusal(
            status if status is not None else number,
            _text(value.get("message")) or _text(value) or "no details",
            _text(value.get("type")),
            None if number is not None else _text(code),
            _text(value.get("param")),
        )
    return Refusal(status, _text(value) or "no details")


def parse_error(status: int | None, body: bytes | str) -> Refusal:
    """What the server said in an error reply, whatever its shape."""
    try:
        parsed = decode_json(body, ErrorBody)
    except msgspec.DecodeError:
        # Plain text (a traceback, a proxy's page): kept whole for the decisions,
        # quoted as one line.
        text = body.strip()
        plain = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        return Refusal(status, plain or "an empty reply")
    if parsed.error is not None:
        return error_value(parsed.error, status)
    if parsed.message is not None:  # older vLLM: {"object": "error", "message": ...}
        return Refusal(
            status,
            _text(parsed.message) or "no details",
            _text(parsed.type),
            None if isinstance(parsed.code, int) else _text(parsed.code),
        )
    if parsed.detail is not None:  # FastAPI: {"detail": ...}
        return Refusal(status, _text(parsed.detail) or "no details")
    return Refusal(status, excerpt(body))


def error_from_reply(
    said: Refusal,
    *,
    config: OpenAIConfig,
    path: str,
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> OllmError:
    """The ``OllmError`` for a server's error reply, worded with what to do next."""
    status = said.status
    url = config.base_url
    who = f"The server at {url}"
    quoted = quote(said.message)
    common: dict[str, Any] = {"provider": PROVIDER, "model": model, "status": status}
    name = repr(model) if model else "the model"
    if said.mentions(*_NO_TOOLS):
        return ToolsUnsupportedError(
            f"{who} cannot give {name} tools natively ({quoted}). ollm uses the ReAct "
            "strategy instead when ollm-react is installed; to use native tools, start vLLM "
            "with --enable-auto-tool-choice --tool-call-parser NAME (llama.cpp: --jinja).",
            **common,
        )
    if status in (401, 403):
        if config.api_key is None:
            step = f"No API key was sent: set {config.api_key_setting}."
        else:
            step = f"Check the key in {config.api_key_setting}, and its access to {name}."
        verb = "refused the API key" if status == 401 else "refused access"
        return AuthenticationError(f"{who} {verb} (HTTP {status}: {quoted}). {step}", **common)
    if status in (400, 413, 422, None) and (
        said.mentions(*_CONTEXT) or ContextExceededError.said_in(said.message)
    ):
        return ContextExceededError.from_server(who, quoted, name=name, **common)
    if status == 404:
        if model is not None and said.mentions("model"):
            return ModelNotFoundError(
                f"{who} has no model {model!r} ({quoted}). See what it has with: "
                f"ollm models list -p {config.provider_name}.",
                **common,
            )
        return InvalidRequestError(
            f"{who} has no route {path} ({quoted}). Check {config.where}: it usually ends "
            "with /v1 (http://127.0.0.1:8000/v1).",
            **common,
        )
    if is_rate_limited(status, headers):
        if said.mentions("insufficient_quota", "quota"):
            return ProviderError(
                f"{who} says the account's quota is used up ({quoted}). Check the plan and "
                "billing of the key in " + config.api_key_setting + ".",
                **common,
            )
        wait = retry_after_seconds(headers) if headers else None
        return RateLimitedError(
            f"{who} is limiting requests (HTTP {status}: {quoted}). Wait a moment and try "
            "again, or lower the number of requests at once.",
            retry_after=wait,
            **common,
        )
    if status is not None and status >= 500:
        where = (
            "a proxy or gateway in front of it"
            if status in (502, 504)
            else "the server (see its log)"
        )
        return ProviderError(
            f"{who} failed (HTTP {status}: {quoted}). Try again; if it keeps happening, "
            f"check {where}.",
            **common,
        )
    if status in (400, 413, 422):
        return InvalidRequestError(
            f"{who} refused the request for {name} (HTTP {status}: {quoted}). Check the "
            "options sent (temperature, stop, max tokens, response format).",
            **common,
        )
    what = f"HTTP {status}" if status is not None else "an error"
    return ProviderError(f"{who} answered {what}: {quoted}.", **common)


def error_from_value(
    said: Refusal, *, config: OpenAIConfig, model: str | None, partial: bool
) -> OllmError:
    """The error for what a server said in the body of a reply (a mid-stream error)."""
    error = error_from_reply(said, config=config, path="/chat/completions", model=model)
    if type(error) is ProviderError and partial:
        return ProviderError(
            f"The server at {config.base_url} failed in the middle of the reply from "
            f"{model!r}: {quote(said.message)}. Try again; if it keeps happening, check "
            "the server's log.",
            provider=PROVIDER,
            model=model,
        )
    return error
