"""What the fake server's chat tests share: a request body and reading the NDJSON back."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

USER = [{"role": "user", "content": "hi"}]
CALL_ID = re.compile(r"^call_[a-z0-9]{8}$")


def chat_body(**fields: Any) -> dict[str, Any]:
    """A chat request for llama3.2 with one user message, and ``fields`` on top."""
    body: dict[str, Any] = {"model": "llama3.2", "messages": USER}
    body.update(fields)
    return body


def lines_of(response: httpx.Response) -> list[dict[str, Any]]:
    """The NDJSON lines of a response, decoded."""
    # Split on "\n" only: str.splitlines (and httpx's iter_lines) also split on U+0085,
    # which JSON strings may hold raw.
    return [json.loads(line) for line in response.content.split(b"\n") if line]
