"""The Messages API's failures as ollm's typed errors, each with a next step.

An error body is ``{"type": "error", "error": {"type", "message"}, "request_id"}``; the
``error.type`` names the family (``invalid_request_error``, ``authentication_error``,
``permission_error``, ``not_found_error``, ``request_too_large``, ``rate_limit_error``,
``api_error``, ``overloaded_error``). Decisions rest on the HTTP status and that type;
the API's own words are always quoted.
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
)
from ollm.kit import excerpt, quote
from ollm_anthropic._config import AnthropicConfig
from ollm_anthropic._wire import ErrorBody
from ollm_http import decode_json, is_rate_limited, retry_after_seconds

__all__ = ["OVERLOADED", "PROVIDER", "ApiError", "api_error", "error_from_reply", "parse_error"]

PROVIDER = "anthropic"
# Anthropic's "overloaded" status: tried again like a 503.
OVERLOADED = 529
_TOO_LONG = ("prompt is too long", "context length", "context window", "too many tokens")


@dataclass(frozen=True)
class ApiError:
    """What the API said: HTTP status, error type, message, request id."""

    status: int | None
    message: str
    type: str | None = None
    request_id: str | None = None

    def mentions(self, *phrases: str) -> bool:
        """Whether the message contains one of ``phrases`` (any case)."""
        text = self.message.lower()
        return any(phrase in text for phrase in phrases)


def api_error(value: Any, status: int | None = None, request_id: str | None = None) -> ApiError:
    """An ``ApiError`` from the ``error`` member of a body (or of an ``error`` event)."""
    if not isinstance(value, dict):
        text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
        return ApiError(status, quote(text) or "no details")
    message = value.get("message")
    kind = value.get("type")
    return ApiError(
        status,
        message.strip() if isinstance(message, str) and message.strip() else "no details",
        kind if isinstance(kind, str) else None,
        request_id,
    )


def parse_error(status: int, body: bytes) -> ApiError:
    """What the API said in an error reply, whatever its shape."""
    try:
        parsed = decode_json(body)
    except msgspec.DecodeError:
        text = body.strip()
        return ApiError(
            status, quote(text.decode("utf-8", "replace")) if text else "an empty reply"
        )
    try:
        wrapped = msgspec.convert(parsed, ErrorBody)
    except msgspec.ValidationError:
        return ApiError(status, excerpt(body))
    if wrapped.error is None:
        return ApiError(status, excerpt(body))
    return api_error(wrapped.error, status, wrapped.request_id)


def _key_step(config: AnthropicConfig) -> str:
    if config.api_key is None:
        return (
            f"No API key was sent: set {config.api_key_setting} (a key from "
            "https://console.anthropic.com/settings/keys)."
        )
    return f"Check the key in {config.api_key_setting}."


def error_from_reply(
    said: ApiError,
    *,
    config: AnthropicConfig,
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> OllmError:
    """The ``OllmError`` for an error reply of the API, worded with what to do next."""
    status, kind = said.status, said.type
    quoted = quote(said.message)
    common: dict[str, Any] = {"provider": PROVIDER, "model": model, "status": status}
    name = repr(model) if model else "the model"
    who = "The Anthropic API" if config.official else f"The Messages API at {config.base_url}"
    said_as = f"HTTP {status}, {kind}" if kind else f"HTTP {status}"
    if status == 401 or kind == "authentication_error":
        return AuthenticationError(
            f"{who} did not accept the API key ({said_as}: {quoted}). {_key_step(config)}",
            **common,
        )
    if status == 403 or kind == "permission_error":
        return AuthenticationError(
            f"{who} refused access ({said_as}: {quoted}). Check that the key in "
            f"{config.api_key_setting} may use {name}.",
            **common,
        )
    if status == 404 or kind == "not_found_error":
        if model is not None and (said.mentions("model") or model in said.message):
            return ModelNotFoundError(
                f"{who} has no model {model!r} ({quoted}). See what it has with: "
                f"ollm models list -p {config.provider_name}",
                **common,
            )
        return InvalidRequestError(
            f"{who} has no such resource ({said_as}: {quoted}). Check {config.where} "
            f"({config.base_url}).",
            **common,
        )
    if status == 413 or kind == "request_too_large":
        return InvalidRequestError(
            f"{who} refused the request as too large ({said_as}: {quoted}). Send fewer or "
            "smaller images and documents, or start a new conversation.",
            **common,
        )
    if is_rate_limited(status, headers) or kind == "rate_limit_error":
        return RateLimitedError(
            f"{who} is limiting requests ({said_as}: {quoted}). Wait and try again, or "
            "lower the rate of requests.",
            retry_after=retry_after_seconds(headers) if headers else None,
            **common,
        )
    if kind == "invalid_request_error" and said.mentions(*_TOO_LONG):
        return ContextExceededError.from_server(who, quoted, name=name, **common)
    if status == OVERLOADED or kind == "overloaded_error":
        return ProviderError(
            f"{who} is overloaded ({said_as}: {quoted}). Try again in a moment; if it keeps "
            "happening, see https://status.anthropic.com.",
            **common,
        )
    if status is not None and status >= 500:
        return ProviderError(
            f"{who} failed ({said_as}: {quoted}). Try again in a moment; if it keeps "
            "happening, see https://status.anthropic.com.",
            **common,
        )
    if status == 400 or kind == "invalid_request_error":
        return InvalidRequestError(
            f"{who} refused the request for {name} ({said_as}: {quoted}). Check the "
            "options, tools and messages sent.",
            **common,
        )
    return ProviderError(f"{who} answered {said_as}: {quoted}.", **common)
