"""Strings that are not valid Unicode, made writable: ollm's one rule for them.

A Python ``str`` may hold lone surrogates (``"\\ud800"``): JSON text may spell them
(``"\\\\ud800"`` is legal JSON, and Python's ``json`` module decodes it), file names
and undecodable bytes come back with them (``surrogateescape``), and UTF-8 cannot
encode them. Wherever ollm writes text out (``encode_event`` and ``ollm chat --json``,
the conversation log, the terminal, the request bodies sent to a provider), such a
string is written with U+FFFD REPLACEMENT CHARACTER in place of each lone surrogate,
never raised on. Valid text is written as it is, and costs nothing extra: the fast
encoder is tried first, and the text is scrubbed only when that fails.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import msgspec

__all__ = ["encode_json", "valid_unicode"]

T = TypeVar("T")

_encode = msgspec.json.Encoder().encode


def valid_unicode(value: T) -> T:
    """``value`` with every string in it made valid Unicode.

    Each lone surrogate becomes U+FFFD; a high surrogate followed by a low one (UTF-16
    spelt in a ``str``) becomes the character the pair encodes. Strings inside dicts
    (keys too: keys that become equal keep the last value), lists, tuples and
    ``msgspec.Struct`` fields are scrubbed, at any depth; other values are returned as
    they are. A value with nothing to scrub is returned unchanged (the same object).
    """
    return cast("T", _scrub(value))


def encode_json(value: Any, encode: Callable[[Any], bytes] = _encode) -> bytes:
    """``value`` as JSON with ``encode`` (msgspec's by default), strings made valid first
    if they have to be (see ``valid_unicode``); other encoding errors propagate."""
    try:
        return encode(value)
    except UnicodeEncodeError:
        return encode(valid_unicode(value))


def _scrub(value: object) -> object:
    if isinstance(value, str):
        return _scrub_str(value)
    if isinstance(value, dict):
        items = [(_scrub(k), _scrub(v)) for k, v in value.items()]
        same = all(
            k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)
        )
        return value if same else dict(items)
    if isinstance(value, (list, tuple)):
        scrubbed = [_scrub(item) for item in value]
        if all(new is old for new, old in zip(scrubbed, value, strict=True)):
            return value
        if isinstance(value, list):
            return scrubbed
        kind: Any = type(value)
        return kind(*scrubbed) if hasattr(value, "_fields") else kind(scrubbed)  # named tuple
    if isinstance(value, msgspec.Struct):
        changes: dict[str, object] = {}
        for name in value.__struct_fields__:
            old = getattr(value, name)
            new = _scrub(old)
            if new is not old:
                changes[name] = new
        return msgspec.structs.replace(value, **changes) if changes else value
    return value


def _scrub_str(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text
