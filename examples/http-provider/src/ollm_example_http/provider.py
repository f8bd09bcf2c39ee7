"""A provider for any server that speaks OpenAI's Chat Completions, on ollm's public kit."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec

import ollm
from ollm.kit import quote
from ollm_http import ErrorContext, HTTPConfig, HTTPProvider, is_rate_limited, retry_after_seconds


class Chunk(msgspec.Struct):
    choices: list[dict[str, Any]] = []


decode_chunk = msgspec.json.Decoder(Chunk).decode


class MiniProvider(HTTPProvider):
    """Streams text from the server at ``MINI_BASE_URL`` (with ``MINI_API_KEY``, if set)."""

    name = "mini"
    wire = "the OpenAI format"

    def __init__(
        self, base_url: str | None = None, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        key = os.environ.get("MINI_API_KEY")
        super().__init__(
            HTTPConfig(
                base_url or os.environ.get("MINI_BASE_URL", "http://127.0.0.1:8000/v1"),
                headers={"Authorization": f"Bearer {key}"} if key else {},
                context=ErrorContext(
                    provider="the mini server", code_name="mini", url_setting="MINI_BASE_URL"
                ),
            ),
            transport=transport,
        )

    def error_for(
        self, status: int, body: bytes, headers: httpx.Headers, *, path: str, model: str | None
    ) -> ollm.OllmError:
        said = quote(body.decode("utf-8", "replace")) or f"HTTP {status}"
        who = f"The mini server at {self.url}"
        if is_rate_limited(status, headers):  # waited for, then tried again
            return ollm.RateLimitedError(
                f"{who} is busy ({said}).", retry_after=retry_after_seconds(headers)
            )
        if status in (401, 403):
            return ollm.AuthenticationError(f"{who} refused the key ({said}). Check MINI_API_KEY.")
        if status == 404:
            return ollm.ModelNotFoundError(f"{who} has no model {model!r} ({said}).", model=model)
        return ollm.ProviderError(f"{who} failed (HTTP {status}: {said}).", status=status)

    async def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        body = {
            "model": request.model,
            "messages": [{"role": m.role, "content": m.text} for m in request.messages],
            "stream": True,
        }
        stream = self.stream(
            "sse", model=request.model, abort=request.abort, headers=request.headers
        )
        try:
            await stream.open("POST", "/chat/completions", json=body)
            reads, frames = stream.reads, stream.frames
            while True:
                data = await reads()  # None: the body ended
                for event in frames(data):
                    if event.data == "[DONE]":
                        stream.done()
                        yield ollm.FinishEvent("stop")
                        return
                    try:
                        chunk = decode_chunk(event.data)
                    except msgspec.DecodeError as exc:
                        yield stream.bad_frame(event.data, exc)
                        return
                    for choice in chunk.choices:
                        if text := (choice.get("delta") or {}).get("content"):
                            yield ollm.TextEvent(text)
                if data is None:
                    break
            yield stream.interrupted()  # the body ended before [DONE]
        except Exception as exc:
            yield stream.failure(exc)  # cancelled, or the error in ollm's words
        finally:
            await stream.aclose()
