"""A request's options checked the same way by every HTTP provider, and its body encoded."""

from __future__ import annotations

import math
from typing import Any

import msgspec

from ollm.errors import InvalidRequestError
from ollm.types import encode_json

__all__ = ["encode_body", "option_number", "stop_sequences"]

_encode = msgspec.json.Encoder().encode


def option_number(name: str, value: object, *, integer: bool = False) -> float | int:
    """``options.NAME`` as a finite number (an ``int`` when ``integer``), or a clear error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "an integer" if integer else "a number"
        raise InvalidRequestError(f"options.{name} must be {kind}, not {value!r}.")
    if integer and not isinstance(value, int):
        raise InvalidRequestError(f"options.{name} must be an integer, not {value!r}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidRequestError(f"options.{name} must be a finite number, not {value!r}.")
    return value


def stop_sequences(stop: object) -> list[str]:
    """``options.stop`` as a list of strings (one string is a list of one), or a clear error."""
    items = (
        [stop] if isinstance(stop, str) else list(stop) if isinstance(stop, (list, tuple)) else None
    )
    if items is None or not all(isinstance(item, str) for item in items):
        raise InvalidRequestError(f"options.stop must be a list of strings, not {stop!r}.")
    return items


def encode_body(body: Any, *, model: str, provider: str) -> msgspec.Raw:
    """``body`` as JSON, encoded once; ``InvalidRequestError`` when it cannot be.

    A string that is not valid Unicode (a lone surrogate in tool arguments a model sent)
    goes with U+FFFD in its place (``ollm.valid_unicode``), scrubbed only if encoding
    as it is failed.
    """
    try:
        return msgspec.Raw(encode_json(body, _encode))
    except (msgspec.EncodeError, TypeError, ValueError, RecursionError) as exc:
        raise InvalidRequestError(
            f"The request to {model!r} cannot be sent as JSON ({exc}). Check the tool "
            "arguments, the options and their extra values.",
            provider=provider,
            model=model,
        ) from None
