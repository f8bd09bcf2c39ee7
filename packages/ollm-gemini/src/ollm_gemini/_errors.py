"""The Gemini API's failures as ollm's typed errors, each with a next step.

Google's error body is a ``google.rpc.Status``: ``{"error": {"code", "message",
"status", "details"}}``, the details typed by ``@type`` (``ErrorInfo`` with a
``reason`` such as ``API_KEY_INVALID``, ``RetryInfo`` with a ``retryDelay`` such as
``"37s"``, ``BadRequest`` with ``fieldViolations``, ``QuotaFailure``). Decisions rest on
the ``status`` and the ``reason``; the API's own words are always quoted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
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
from ollm_gemini._config import ENV_API_KEY, GeminiConfig
from ollm_gemini._wire import ErrorBody
from ollm_http import decode_json, is_rate_limited, retry_after_seconds

__all__ = ["PROVIDER", "ApiError", "error_from_reply", "parse_error"]

PROVIDER = "gemini"
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)s\s*")
_BAD_KEY = ("API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_SERVICE_BLOCKED")


@dataclass(frozen=True)
class ApiError:
    """What the API said: HTTP status, ``status`` name, message and the details ollm reads."""

    code: int | None
    message: str
    status: str | None = None
    reason: str | None = None
    retry_delay: float | None = None
    fields: tuple[tuple[str, str], ...] = ()
    quota: tuple[str, ...] = field(default=())

    def mentions(self, *phrases: str) -> bool:
        """Whether the message or the reason contains one of ``phrases`` (any case)."""
        text = f"{self.message} {self.reason or ''}".lower()
        return any(phrase.lower() in text for phrase in phrases)


def _delay(value: Any) -> float | None:
    if isinstance(value, str):
        match = _DURATION.fullmatch(value)
        if match:
            return float(match.group(1))
    return None


def api_error(value: Any, status: int | None = None) -> ApiError:
    """An ``ApiError`` from the ``error`` member of a body."""
    if not isinstance(value, dict):
        text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
        return ApiError(status, quote(text) or "no details")
    code = value.get("code")
    number = code if isinstance(code, int) and not isinstance(code, bool) else None
    message = value.get("message")
    reason: str | None = None
    delay: float | None = None
    fields: list[tuple[str, str]] = []
    quota: list[str] = []
    details = value.get("details")
    for detail in details if isinstance(details, list) else []:
        if not isinstance(detail, dict):
            continue
        kind = str(detail.get("@type", ""))
        if kind.endswith("ErrorInfo") and isinstance(detail.get("reason"), str):
            reason = detail["reason"]
        elif kind.endswith("RetryInfo"):
            delay = _delay(detail.get("retryDelay"))
        elif kind.endswith("BadRequest"):
            for violation in detail.get("fieldViolations") or []:
                if isinstance(violation, dict):
                    fields.append(
                        (str(violation.get("field", "")), str(violation.get("description", "")))
                    )
        elif kind.endswith("QuotaFailure"):
            for violation in detail.get("violations") or []:
                if isinstance(violation, dict) and violation.get("quotaId"):
                    quota.append(str(violation["quotaId"]))
    return ApiError(
        status if status is not None else number,
        message.strip() if isinstance(message, str) and message.strip() else "no details",
        value.get("status") if isinstance(value.get("status"), str) else None,
        reason,
        delay,
        tuple(fields),
        tuple(quota),
    )


def parse_error(status: int, body: bytes) -> ApiError:
    """What the API said in an error reply, whatever its shape (an object, a list of one)."""
    try:
        parsed = decode_json(body)
    except msgspec.DecodeError:
        text = body.strip()
        # One line of a plain-text body (a traceback, a proxy's page); the whole is for --debug.
        return ApiError(
            status, quote(text.decode("utf-8", "replace")) if text else "an empty reply"
        )
    if isinstance(parsed, list) and parsed and isinstance(parsed[0], dict):
        parsed = parsed[0]  # streamGenerateContent without alt=sse wraps it in a list
    try:
        wrapped = msgspec.convert(parsed, ErrorBody)
    except msgspec.ValidationError:
        return ApiError(status, excerpt(body))
    if wrapped.error is None:
        return ApiError(status, excerpt(body))
    return api_error(wrapped.error, status)


def _key_step(config: GeminiConfig) -> str:
    if config.api_key is None:
        return (
            f"No API key was sent: set {ENV_API_KEY} (a key from "
            "https://aistudio.google.com/apikey)."
        )
    return f"Check the key in {config.api_key_setting}."


def error_from_reply(
    said: ApiError,
    *,
    config: GeminiConfig,
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> OllmError:
    """The ``OllmError`` for an error reply of the API, worded with what to do next."""
    code = said.code
    quoted = quote(said.message)
    common: dict[str, Any] = {"provider": PROVIDER, "model": model, "status": code}
    name = repr(model) if model else "the model"
    who = "The Gemini API"
    if said.reason in _BAD_KEY or said.mentions("API key not valid", "API key expired"):
        return AuthenticationError(
            f"{who} refused the API key ({quoted}). {_key_step(config)}", **common
        )
    if code == 401 or said.status == "UNAUTHENTICATED":
        return AuthenticationError(
            f"{who} did not accept the credentials (HTTP {code}: {quoted}). {_key_step(config)}",
            **common,
        )
    if code == 403 or said.status == "PERMISSION_DENIED":
        step = (
            _key_step(config)
            if config.api_key is None
            else f"Check that the key in {config.api_key_setting} may use {name} and that "
            "the Generative Language API is enabled for its project."
        )
        return AuthenticationError(
            f"{who} refused access (HTTP {code}: {quoted}). {step}", **common
        )
    if code == 404 or said.status == "NOT_FOUND":
        if model is not None and said.mentions("model", model):
            return ModelNotFoundError(
                f"{who} has no model {model!r} for this method ({quoted}). See what it has "
                "with: ollm models list -p gemini.",
                **common,
            )
        return InvalidRequestError(
            f"{who} has no such resource (HTTP 404: {quoted}). Check {config.where} "
            f"({config.base_url}).",
            **common,
        )
    if is_rate_limited(code, headers) or said.status == "RESOURCE_EXHAUSTED":
        wait = said.retry_delay
        if wait is None and headers:
            wait = retry_after_seconds(headers)
        which = f" (quota {', '.join(said.quota[:3])})" if said.quota else ""
        return RateLimitedError(
            f"{who} is limiting requests{which} (HTTP {code}: {quoted}). Wait and try again, "
            "lower the rate of requests, or check the plan of the key's project.",
            retry_after=wait,
            **common,
        )
    if said.mentions("exceeds the maximum number of tokens", "input token count", "too long"):
        return ContextExceededError.from_server(who, quoted, name=name, **common)
    if code is not None and code >= 500:
        what = {
            503: "is overloaded or unavailable",
            504: "took too long (deadline exceeded)",
        }.get(code, "failed")
        return ProviderError(
            f"{who} {what} (HTTP {code}: {quoted}). Try again in a moment; if it keeps "
            "happening, see https://aistudio.google.com/status.",
            **common,
        )
    if code == 400 or said.status in ("INVALID_ARGUMENT", "FAILED_PRECONDITION"):
        if said.fields:
            fields = "; ".join(f"{f}: {d}" if d else f for f, d in said.fields[:5])
            where = f" The field{'s' if len(said.fields) > 1 else ''}: {fields}."
        else:
            where = ""
        step = (
            " Gemini is not offered where the key's project is (FAILED_PRECONDITION): "
            "see https://ai.google.dev/gemini-api/docs/available-regions."
            if said.status == "FAILED_PRECONDITION"
            else " Check the options, tools and messages sent."
        )
        return InvalidRequestError(
            f"{who} refused the request for {name} (HTTP {code}: {quoted}).{where}{step}",
            **common,
        )
    what = f"HTTP {code}" if code is not None else "an error"
    return ProviderError(f"{who} answered {what}: {quoted}.", **common)
