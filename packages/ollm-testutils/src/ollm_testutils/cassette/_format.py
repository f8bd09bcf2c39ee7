"""The cassette file: readable JSON, one episode (a request and its reply) after another.

::

    {
      "ollm_cassette": 1,
      "episodes": [
        {
          "request": {"wire": "openai", "method": "POST", "path": "/v1/chat/completions",
                      "query": "", "body": {"model": "...", "messages": [...]}},
          "reply": {"status": 200, "headers": {"content-type": "text/event-stream"},
                    "chunked": true, "frames": ["data: {...}\\n\\n", {"base64": "4oI="}]}
        },
        {
          "request": {"provider": "llamacpp", "model": "...", "messages": [...]},
          "events": [{"type": "text", "text": "Hi"}, {"type": "finish", "reason": "stop"}]
        }
      ]
    }

A request is stored as its canonical form (JSON with sorted keys, secrets scrubbed,
volatile fields normalised), and its key is the SHA-256 of that form. A reply keeps its
frames: each piece of the body as it arrived, a string when it is UTF-8 on its own,
else ``{"base64": ...}`` (half a character); a whole JSON body is stored as ``json``.
An in-process provider's episode keeps its provider events instead.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FORMAT",
    "Episode",
    "HttpReply",
    "diff_against_nearest",
    "dump",
    "key_of",
    "load",
    "normalise_volatile",
    "pretty",
]

FORMAT = 1


@dataclass
class HttpReply:
    """A recorded HTTP reply: status, the headers kept, and the body's frames."""

    status: int
    headers: dict[str, str]
    frames: list[bytes]
    chunked: bool
    cut: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status, "headers": self.headers}
        data["chunked"] = self.chunked
        body = b"".join(self.frames)
        whole = _json_value(body) if not self.chunked and _is_json(self.headers) else None
        if whole is not None:
            data["json"] = whole[0]
        else:
            data["frames"] = [_frame_json(frame) for frame in self.frames]
        if self.cut:
            data["cut"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HttpReply:
        if "json" in data:
            frames = [json.dumps(data["json"], ensure_ascii=False).encode()]
        else:
            frames = [_frame_bytes(frame) for frame in data.get("frames", [])]
        return cls(
            status=int(data["status"]),
            headers={str(k): str(v) for k, v in dict(data.get("headers", {})).items()},
            frames=frames,
            chunked=bool(data.get("chunked", False)),
            cut=bool(data.get("cut", False)),
        )


@dataclass
class Episode:
    """One request and what answered it: an HTTP reply, or a provider's events."""

    request: dict[str, Any]
    reply: HttpReply | None = None
    events: list[dict[str, Any]] | None = None
    key: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.key:
            self.key = key_of(self.request)

    @property
    def kind(self) -> str:
        """``wire NAME`` or ``provider NAME``: what the episode belongs to."""
        if "wire" in self.request:
            return f"wire {self.request['wire']}"
        return f"provider {self.request.get('provider')}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"request": self.request}
        if self.reply is not None:
            data["reply"] = self.reply.to_json()
        if self.events is not None:
            data["events"] = self.events
        return data


def key_of(request: dict[str, Any]) -> str:
    """The SHA-256 of a canonical request (JSON with sorted keys, compact)."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def pretty(request: dict[str, Any]) -> str:
    """A canonical request as indented JSON, for diffs."""
    return json.dumps(request, sort_keys=True, indent=2, ensure_ascii=False)


def normalise_volatile(value: Any, volatile: frozenset[str]) -> Any:
    """``value`` with the string values of ``volatile`` fields numbered by first
    appearance (``<id-1>``...), so that a call's id and its result's still match."""
    seen: dict[str, str] = {}

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            out = {}
            for k, v in item.items():
                if k in volatile and isinstance(v, str):
                    out[k] = seen.setdefault(v, f"<id-{len(seen) + 1}>")
                else:
                    out[k] = walk(v)
            return out
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    return walk(value)


def load(path: Path) -> list[Episode]:
    """The episodes of the cassette at ``path`` (none when there is no file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"The cassette {path} is not JSON ({exc}). Delete it and record it again."
        ) from None
    if not isinstance(data, dict) or data.get("ollm_cassette") != FORMAT:
        raise ValueError(
            f"The cassette {path} is not an ollm cassette of format {FORMAT}. "
            "Delete it and record it again."
        )
    episodes = []
    for item in data.get("episodes", []):
        reply = HttpReply.from_json(item["reply"]) if "reply" in item else None
        episodes.append(Episode(dict(item["request"]), reply, item.get("events")))
    return episodes


def dump(path: Path, episodes: list[Episode]) -> None:
    """Write ``episodes`` to ``path`` at once (a crash leaves the old file whole)."""
    data = {"ollm_cassette": FORMAT, "episodes": [e.to_json() for e in episodes]}
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        # A file to commit: readable as any other (mkstemp's is the owner's alone).
        os.chmod(temporary, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def diff_against_nearest(request: dict[str, Any], episodes: list[Episode]) -> str:
    """A unified diff from the most alike recorded request to ``request``."""
    wanted = pretty(request).splitlines()
    same_kind = [e for e in episodes if ("wire" in e.request) == ("wire" in request)]
    if not same_kind:
        return "(the cassette has no recording of this kind to compare with)"
    best: list[str] = []
    best_ratio = -1.0
    for episode in same_kind:
        lines = pretty(episode.request).splitlines()
        ratio = difflib.SequenceMatcher(None, lines, wanted, autojunk=False).ratio()
        if ratio > best_ratio:
            best, best_ratio = lines, ratio
    diff = difflib.unified_diff(best, wanted, "recorded", "requested", lineterm="", n=3)
    return "\n".join(diff)


def _is_json(headers: dict[str, str]) -> bool:
    return "json" in headers.get("content-type", "").lower()


def _json_value(body: bytes) -> tuple[Any] | None:
    try:
        return (json.loads(body),)
    except ValueError:
        return None


def _frame_json(frame: bytes) -> str | dict[str, str]:
    try:
        return frame.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(frame).decode("ascii")}


def _frame_bytes(frame: str | dict[str, str]) -> bytes:
    if isinstance(frame, str):
        return frame.encode("utf-8")
    return base64.b64decode(frame["base64"])
