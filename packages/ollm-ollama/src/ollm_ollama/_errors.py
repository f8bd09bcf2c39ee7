"""Ollama's failures as ollm's typed errors, each saying what happened and what to do.

Error text differs between routes and server versions (``'x'`` versus ``"x"``, "try
pulling it first"), so the decisions rest on the status code; the server's own words
are kept in every message. Only the capability answers ("does not support tools")
are recognised by their text, because the runtime acts on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import msgspec

from ollm.errors import (
    AuthenticationError,
    ContextExceededError,
    InvalidRequestError,
    ModelNotFoundError,
    OllmError,
    ProviderError,
    RateLimitedError,
    RequestTimeoutError,
    ToolsUnsupportedError,
)
from ollm.kit import quote
from ollm_http import is_rate_limited, retry_after_seconds
from ollm_ollama._config import OllamaConfig
from ollm_ollama._wire import ErrorBody, decoder

__all__ = [
    "PROVIDER",
    "error_from_status",
    "error_from_text",
    "server_message",
]

PROVIDER = "ollama"


def server_message(body: bytes) -> str | None:
    """The ``error`` of a ``{"error": ...}`` body, or ``None`` if the body is not one."""
    try:
        parsed = decoder(ErrorBody).decode(body)
    except msgspec.DecodeError:
        return None
    return describe_error_value(parsed.error)


def describe_error_value(value: object) -> str | None:
    """The text of an ``error`` field (a string, or an object from a proxy)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, dict):
        message = value.get("message")
        if isinstance(message, str) and message.strip():
            return message.strip()
    return quote(msgspec.json.encode(value).decode())


def error_from_text(text: str, *, model: str | None, status: int | None = None) -> OllmError | None:
    """The error for a capability answer ("does not support tools"), else ``None``."""
    lowered = text.lower()
    name = repr(model) if model else "The model"
    if "does not support tools" in lowered:
        return ToolsUnsupportedError(
            f"{name} cannot call tools natively: Ollama said {quote(text)!r}. Choose a model "
            "with tool support, or install ollm-react, which gives tools to any model "
            "(ReAct).",
            provider=PROVIDER,
            model=model,
            status=status,
        )
    if "does not support thinking" in lowered:
        return InvalidRequestError(
            f"{name} does not support thinking: Ollama said {quote(text)!r}. Leave thinking "
            "unset (no --think; think=None in Python), or choose a thinking model.",
            provider=PROVIDER,
            model=model,
            status=status,
        )
    if "does not support chat" in lowered or "does not support generate" in lowered:
        return InvalidRequestError(
            f"{name} cannot chat: Ollama said {quote(text)!r}. It is probably an embedding "
            "model: use it with embed(), or choose a chat model (ollm models list).",
            provider=PROVIDER,
            model=model,
            status=status,
        )
    return None


def error_from_status(
    status: int,
    body: bytes,
    *,
    config: OllamaConfig,
    path: str,
    model: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> OllmError:
    """The error for an HTTP answer with a status of 400 or more."""
    url = config.host
    text = server_message(body)
    plain = body.decode("utf-8", "replace").strip()
    said = quote(text or plain) if (text or plain) else ""
    common: dict[str, Any] = {"provider": PROVIDER, "model": model, "status": status}
    if text is not None:
        capability = error_from_text(text, model=model, status=status)
        if capability is not None:
            return capability
    if status == 404:
        if text is not None and model:
            return ModelNotFoundError(
                f"Model {model!r} is not on the Ollama server at {url} ({said}). "
                f"Pull it with: ollm models pull {model}",
                **common,
            )
        return ProviderError(
            f"The route {path} does not exist at {url} ({said or 'HTTP 404'}). Check that "
            f"{url} is an Ollama server (OLLAMA_HOST) and that it is recent enough: update Ollama.",
            **common,
        )
    if status == 403 and not plain:
        host = httpx.URL(url).host
        return ProviderError(
            f"Ollama at {url} refused the request with 403 and an empty body: a server "
            "listening on loopback only answers requests whose Host header names this "
            f"machine, and this one said {host!r} (a proxy or a tunnel does that). Connect "
            "to http://127.0.0.1:11434 or http://localhost:11434 directly, have the proxy "
            "send Host: localhost, or start the server with OLLAMA_HOST=0.0.0.0 (and "
            "OLLAMA_ORIGINS for browser origins).",
            **common,
        )
    if status in (401, 403):
        return AuthenticationError(
            f"Ollama at {url} refused access (HTTP {status}: {said}). Set OLLAMA_API_KEY "
            "to a key that may use this server.",
            **common,
        )
    if is_rate_limited(status, headers):
        return RateLimitedError(
            f"Ollama at {url} is limiting requests (HTTP {status}: {said or 'no details'}). "
            "Wait a moment and try again, or lower the number of requests at once "
            "(OLLAMA_NUM_PARALLEL and OLLAMA_MAX_QUEUE on the server).",
            retry_after=retry_after_seconds(headers) if headers else None,
            **common,
        )
    if path == "/api/chat" and status in (400, 500) and ContextExceededError.said_in(text or plain):
        # With "truncate": false, a prompt longer than num_ctx is refused (the runner's
        # words, or llama.cpp's exceed_context_size_error JSON inside Ollama's); an
        # embedding's input too long stays an INVALID_REQUEST about that input.
        return ContextExceededError.from_server(
            f"Ollama at {url}", said, name=repr(model) if model else "the model", **common
        )
    if status == 400:
        return InvalidRequestError(
            f"Ollama at {url} rejected the request: {said or 'HTTP 400'}. Check the model "
            "name, the messages and the options.",
            **common,
        )
    if status == 405:
        return ProviderError(
            f"The route {path} at {url} does not accept this request (HTTP 405: {said}). "
            f"Check that {url} is an Ollama server and that it is up to date.",
            **common,
        )
    if status == 499:
        return ProviderError(
            f"Ollama at {url} says the request was cancelled ({said}). Try again.", **common
        )
    if status == 503:
        return ProviderError(
            f"Ollama at {url} is too busy to take the request ({said or 'HTTP 503'}). Try "
            "again in a moment, or raise OLLAMA_MAX_QUEUE on the server.",
            **common,
        )
    if status in (502, 504):
        return (RequestTimeoutError if status == 504 else ProviderError)(
            f"A proxy in front of Ollama at {url} could not get an answer (HTTP {status}: "
            f"{said}). Check that Ollama runs behind it, and the proxy's timeouts.",
            **common,
        )
    if status >= 500:
        return ProviderError(
            f"Ollama at {url} failed (HTTP {status}): {said or 'no details'}. Check the "
            "server's log (the output of ollama serve); a wrongly typed option or a model "
            "that crashed while loading also cause this.",
            **common,
        )
    return ProviderError(
        f"Ollama at {url} answered HTTP {status}: {said or 'no details'}.", **common
    )
