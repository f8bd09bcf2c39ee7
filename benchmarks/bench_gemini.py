"""Gemini streaming: ollm-gemini against Google's `google-genai` SDK, one run.

    python bench_gemini.py serve             prints its URL, serves until stdin closes
    python bench_gemini.py client NAME URL CHUNKS REPEATS BACKEND
    python bench_gemini.py import NAME       time to import a client (ms)

The server answers ``streamGenerateContent?alt=sse`` as the Gemini API frames it (one
``data:`` event per HTTP chunk, ``\\r\\n`` line ends, a ``GenerateContentResponse`` per
token with ``usageMetadata``, the finish reason in the last), with every body encoded in
advance, so that it is never the limit. The runner is bench_openai's.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import bench_openai

SIZES = bench_openai.SIZES


def _body(chunks: int) -> bytes:
    events = []
    for i in range(chunks):
        last = i == chunks - 1
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": f"{i % 1000:03d} "}], "role": "model"},
            "index": 0,
        }
        if last:
            candidate["finishReason"] = "STOP"
        usage: dict[str, Any] = {"promptTokenCount": 1}
        if last:
            usage.update(candidatesTokenCount=chunks, totalTokenCount=chunks + 1)
        value = {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": "bench",
            "responseId": "bench",
        }
        events.append(b"data: " + json.dumps(value).encode() + b"\r\n\r\n")
    return b"".join(b"%x\r\n%b\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


def serve() -> None:
    from ollm_testutils.httpserver import HttpServer

    bodies = {f"bench-{n}": _body(n) for n in SIZES}

    def handle(request: Any, response: Any, connection: Any) -> None:
        name = request.path.rpartition("/")[2].partition(":")[0]
        body = bodies[name]
        response.start_chunked(200, "text/event-stream")
        for start in range(0, len(body), 1 << 20):
            response.write_framed(body[start : start + (1 << 20)])
        response.finished = True

    server = HttpServer(handle)
    server.start()
    print(f"http://127.0.0.1:{server.port}", flush=True)
    sys.stdin.read()
    server.stop()


class Ollm(bench_openai.Ollm):
    async def open(self, url: str) -> None:
        import ollm
        from ollm_gemini import GeminiProvider

        self.text = ollm.TextEvent
        self.provider = GeminiProvider("bench", base_url=url, environ={})  # type: ignore[assignment]
        self.client = ollm.ChatClient(ollm.Registries(), provider=self.provider)


class GoogleGenAI:
    async def open(self, url: str) -> None:
        from google import genai
        from google.genai import types

        self.client = genai.Client(
            api_key="bench", http_options=types.HttpOptions(base_url=url, api_version="v1beta")
        )

    async def stream(self, model: str) -> int:
        count = 0
        stream = await self.client.aio.models.generate_content_stream(model=model, contents="go")
        async for chunk in stream:
            if chunk.text:
                count += 1
        return count

    async def close(self) -> None:
        await self.client.aio.aclose()


class RawHttpx:
    """httpx + ``aiter_lines`` + msgspec: the floor of any Python client on httpx."""

    async def open(self, url: str) -> None:
        import httpx
        import msgspec

        self.http = httpx.AsyncClient(base_url=url, timeout=60)
        self.decode = msgspec.json.decode

    async def stream(self, model: str) -> int:
        count = 0
        body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}]}
        path = f"/v1beta/models/{model}:streamGenerateContent?alt=sse"
        async with self.http.stream("POST", path, json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    chunk = self.decode(line[6:])
                    parts = chunk["candidates"][0].get("content", {}).get("parts", ())
                    if any(p.get("text") for p in parts):
                        count += 1
        return count

    async def close(self) -> None:
        await self.http.aclose()


CLIENTS = {"ollm": Ollm, "google-genai": GoogleGenAI, "raw-httpx": RawHttpx}
IMPORTS = {
    "ollm_gemini": "import ollm, ollm_gemini",
    "google-genai": "from google import genai",
}


def server_alone(url: str, chunks: int, repeats: int) -> dict[str, Any]:
    from child import socket_rate

    path = f"/v1beta/models/bench-{chunks}:streamGenerateContent?alt=sse"
    return socket_rate(url, path, {"contents": []}, b'"text"', repeats)


if __name__ == "__main__":
    bench_openai.main(
        sys.argv[1:], serve_=serve, clients=CLIENTS, imports=IMPORTS, alone=server_alone
    )
