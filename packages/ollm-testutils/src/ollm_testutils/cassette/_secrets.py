"""What a cassette never stores: keys, tokens, cookies, passwords.

Two nets, both applied at record time (and to each request's key, so that a replay
matches what was recorded):

- the secrets a request carries where secrets go (an ``Authorization`` header, any
  header named like a key, a token, a cookie or a session, the userinfo of the
  upstream's URL, every query value but a few known harmless ones) are learnt as
  literal strings and removed wherever they appear, a server's echo of them included;
- the patterns of ollm's ``redact`` middleware (API keys of every known shape, JWTs)
  are applied to every body, request and reply, across the frame boundaries of a
  stream: a key streamed in pieces is still found.

The ``redact`` middleware is built through plugin discovery, as any third party
builds it: its patterns are ollm's, not a copy. If it cannot be built the cassette
refuses to record (a safety net that is missing fails closed).
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

__all__ = ["REDACTED", "Scrubber", "default_redact", "strip_userinfo"]

REDACTED = "[REDACTED]"

# A header whose name says it carries a credential: its value is a secret.
_SECRET_HEADER = re.compile(
    r"auth|key|token|secret|cookie|session|passw|credential|signature", re.IGNORECASE
)
# A JSON field whose name is a credential (exact names: ``max_tokens`` is not one).
_SECRET_FIELD = re.compile(
    r"(?:api[_-]?key|apikey|key|token|access[_-]?token|refresh[_-]?token|id[_-]?token"
    r"|secret|client[_-]?secret|password|passwd|authorization|cookie|credentials?)",
    re.IGNORECASE,
)
# Query parameters whose values are known to be harmless (Gemini's ``alt=sse``, paging);
# every other value is a secret until shown otherwise.
_KEPT_QUERY = frozenset({"alt", "pagesize", "stream", "limit", "order"})
# Shorter literals are not looked for in bodies: they would cut ordinary words apart.
_MIN_SECRET = 4
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "apikey"})


@functools.cache
def default_redact() -> Any:
    """The ``redact`` middleware with its built-in patterns, built through discovery."""
    import importlib.metadata

    import ollm

    installed = importlib.metadata.entry_points(group="ollm.plugins")
    points = [ep for ep in installed if ep.name == "middleware"]
    registries = ollm.discover(settings=ollm.PluginSettings(), entry_points=points)
    try:
        built = registries.middleware.create("redact")
    except ollm.OllmError as exc:
        raise RuntimeError(
            "ollm cassette: the `redact` middleware of ollm-core could not be built, so "
            f"nothing is recorded (secrets could leak into the cassette): {exc}"
        ) from exc
    if not callable(getattr(built, "text", None)) or getattr(built, "pattern", None) is None:
        raise RuntimeError("ollm cassette: the `redact` middleware has no patterns to apply")
    return built


def strip_userinfo(url: str) -> str:
    """``url`` without its ``user:password@`` and its query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return parts._replace(netloc=netloc, query="", fragment="").geturl()


class Scrubber:
    """Removes learnt secrets and the ``redact`` patterns' matches from what is stored."""

    def __init__(self, redact: Any | None = None) -> None:
        self._redact = redact if redact is not None else default_redact()
        self._secrets: set[str] = set()
        self._lock = threading.Lock()
        self._literal: re.Pattern[str] | None = None

    # -- learning ----------------------------------------------------------------------

    def learn(self, values: Iterable[str]) -> None:
        """Treat each of ``values`` (long enough to find) as a secret from now on."""
        with self._lock:
            new = {v for v in values if len(v) >= _MIN_SECRET} - self._secrets
            if not new:
                return
            self._secrets |= new
            # Longest first, so a secret that contains another goes as a whole.
            ordered = sorted(self._secrets, key=len, reverse=True)
            self._literal = re.compile("|".join(re.escape(s) for s in ordered))

    def learn_headers(self, headers: Mapping[str, str]) -> None:
        """The secrets of request headers: credentials, cookies, anything named a key."""
        found: list[str] = []
        for name, value in headers.items():
            if not _SECRET_HEADER.search(name):
                continue
            found.append(value)
            found.extend(_parts(value))
        self.learn(found)

    def learn_url(self, url: str) -> None:
        """The userinfo of ``url`` and the values of its query."""
        parts = urlsplit(url)
        found = [parts.username or "", parts.password or ""]
        found += [unquote(found[0]), unquote(found[1])]
        self.learn(found)
        self.query(parts.query)

    # -- applying ----------------------------------------------------------------------

    def query(self, query: str) -> str:
        """A query string, sorted, with the values of all but harmless names redacted
        (and learnt)."""
        pairs = parse_qsl(query, keep_blank_values=True)
        self.learn(value for name, value in pairs if name.lower() not in _KEPT_QUERY)
        kept = [
            (name, value if name.lower() in _KEPT_QUERY else REDACTED)
            for name, value in sorted(pairs)
        ]
        return urlencode(kept, safe="[]")

    def text(self, text: str) -> str:
        """``text`` with every secret and every ``redact`` match replaced."""
        spans = self._spans(text)
        if not spans:
            return text
        out: list[str] = []
        shown = 0
        for start, end in spans:
            out += (text[shown:start], REDACTED)
            shown = end
        out.append(text[shown:])
        return str(self._redact.text("".join(out)))

    def json(self, value: Any) -> Any:
        """A JSON value with every string scrubbed and credential fields redacted (their
        values learnt, so that a server's echo of them goes too)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            self.learn(
                str(v)
                for k, v in value.items()
                if _SECRET_FIELD.fullmatch(str(k)) and isinstance(v, (str, int))
            )
            return {
                self.text(str(k)): (
                    REDACTED
                    if _SECRET_FIELD.fullmatch(str(k)) and isinstance(v, (str, int))
                    else self.json(v)
                )
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.json(v) for v in value]
        return value

    def frames(self, frames: list[bytes]) -> list[bytes]:
        """The pieces of a body, scrubbed as one text and cut where they were cut.

        A secret cut across pieces is replaced in the piece where it starts and dropped
        from the pieces it continues into. Bytes stay bytes: the text is read as Latin-1
        (one character a byte), so a UTF-8 character cut between pieces stays cut, and
        the patterns (ASCII) never match inside one.
        """
        joined = b"".join(frames).decode("latin-1")
        spans = self._spans(joined)
        if not spans:
            return frames
        out: list[bytes] = []
        start_of_piece = 0
        for frame in frames:
            end_of_piece = start_of_piece + len(frame)
            cursor = start_of_piece
            pieces: list[str] = []
            for start, end in spans:
                if end <= start_of_piece or start >= end_of_piece:
                    continue
                if start >= start_of_piece:
                    pieces += (joined[cursor:start], REDACTED)
                cursor = max(cursor, min(end, end_of_piece))
            pieces.append(joined[cursor:end_of_piece])
            out.append("".join(pieces).encode("latin-1"))
            start_of_piece = end_of_piece
        if self._spans(b"".join(out).decode("latin-1")):
            # Replacements that made a new match (never seen): one piece, fully scrubbed.
            return [self.text(b"".join(frames).decode("latin-1")).encode("latin-1")]
        return out

    def _spans(self, text: str) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        literal = self._literal
        if literal is not None:
            found += [m.span() for m in literal.finditer(text)]
        found += [m.span() for m in self._redact.pattern.finditer(text) if m.end() > m.start()]
        if len(found) < 2:
            return found
        found.sort()
        merged = [found[0]]
        for start, end in found[1:]:
            last_start, last_end = merged[-1]
            if start <= last_end:
                merged[-1] = (last_start, max(end, last_end))
            else:
                merged.append((start, end))
        return merged


def _parts(value: str) -> list[str]:
    """The secret pieces of a credential header: the token after its scheme, the user
    and password of Basic, each cookie's value."""
    parts: list[str] = []
    words = value.split()
    if len(words) == 2 and words[0].lower() in _AUTH_SCHEMES:
        parts.append(words[1])
        if words[0].lower() == "basic":
            try:
                decoded = base64.b64decode(words[1], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                decoded = ""
            parts += decoded.split(":", 1)
    for cookie in value.split(";"):
        _, equals, cookie_value = cookie.partition("=")
        if equals:
            parts.append(cookie_value.strip())
    return parts
