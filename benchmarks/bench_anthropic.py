"""Messages API streaming: ollm-anthropic against the official `anthropic` SDK, one run.

    python bench_anthropic.py serve             prints its URL, serves until stdin closes
    python bench_anthropic.py client NAME URL CHUNKS REPEATS BACKEND
    python bench_anthropic.py import NAME       time to import a client (ms)

The bodies are FakeAnthropicServer's own: at start-up the fake answers each size once
(``message_start``, ``ping``, a text block of N ``text_delta`` events, ``message_delta``,
``message_stop``, each with its ``event:`` line), and its bytes are then served again, one
event per HTTP chunk, written in large writes, so that the server is never the limit (the
"server alone" row shows its rate). The runner is bench_openai's.
"""

from __future__ import annotations

import sys
from typing import Any

import bench_openai

SIZES = bench_openai.SIZES
KEY = "bench"
MESSAGES = [{"role": "user", "content": "go"}]


def _bodies() -> dict[str, bytes]:
    """Each size's body as FakeAnthropicServer writes it, framed one event per chunk."""
    import httpx

    from ollm_testutils import AnthropicReply, FakeAnthropicServer

    models = [f"bench-{n}" for n in SIZES]
    bodies: dict[str, bytes] = {}
    with FakeAnthropicServer(api_key=KEY, models=models) as fake:
        for model, n in zip(models, SIZES, strict=True):
            fake.script(AnthropicReply([f"{i % 1000:03d} " for i in range(n)], usage=(1, n)))
            reply = httpx.post(
                f"{fake.url}/v1/messages",
                json={"model": model, "max_tokens": n, "messages": MESSAGES, "stream": True},
                headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
                timeout=120,
            )
            events = [e + b"\n\n" for e in reply.content.split(b"\n\n") if e]
            bodies[model] = b"".join(b"%x\r\n%b\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
    return bodies


def serve() -> None:
    import json

    from ollm_testutils.httpserver import HttpServer

    bodies = _bodies()

    def handle(request: Any, response: Any, connection: Any) -> None:
        model = json.loads(request.body)["model"]
        body = bodies[model]
        response.start_chunked(200, "text/event-stream; charset=utf-8")
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
        from ollm_anthropic import AnthropicProvider

        self.text = ollm.TextEvent
        self.provider = AnthropicProvider(KEY, base_url=url, environ={})  # type: ignore[assignment]
        self.client = ollm.ChatClient(ollm.Registries(), provider=self.provider)


class AnthropicSDK:
    """``AsyncAnthropic().messages.create(stream=True)``: the SDK's raw events."""

    async def open(self, url: str) -> None:
        import anthropic

        self.client = anthropic.AsyncAnthropic(api_key=KEY, base_url=url, max_retries=0)

    async def stream(self, model: str) -> int:
        count = 0
        stream = await self.client.messages.create(
            model=model,
            max_tokens=1024,
            messages=MESSAGES,
            stream=True,  # type: ignore[arg-type]
        )
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                count += 1
        return count

    async def close(self) -> None:
        await self.client.close()


class AnthropicSDKHelper(AnthropicSDK):
    """``AsyncAnthropic().messages.stream()``: the SDK's accumulating helper, text events."""

    async def stream(self, model: str) -> int:
        count = 0
        async with self.client.messages.stream(
            model=model,
            max_tokens=1024,
            messages=MESSAGES,  # type: ignore[arg-type]
        ) as stream:
            async for event in stream:
                if event.type == "text":
                    count += 1
        return count


class RawHttpx:
    """httpx + ``aiter_lines`` + msgspec: the floor of any Python client on httpx."""

    async def open(self, url: str) -> None:
        import httpx
        import msgspec

        self.http = httpx.AsyncClient(
            base_url=url,
            timeout=60,
            headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
        )
        self.decode = msgspec.json.decode

    async def stream(self, model: str) -> int:
        count = 0
        body = {"model": model, "max_tokens": 1024, "messages": MESSAGES, "stream": True}
        async with self.http.stream("POST", "/v1/messages", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    event = self.decode(line[6:])
                    if event["type"] == "content_block_delta" and event["delta"].get("text"):
                        count += 1
        return count

    async def close(self) -> None:
        await self.http.aclose()


CLIENTS = {
    "ollm": Ollm,
    "anthropic": AnthropicSDK,
    "anthropic-stream": AnthropicSDKHelper,
    "raw-httpx": RawHttpx,
}
IMPORTS = {
    "ollm_anthropic": "import ollm, ollm_anthropic",
    "anthropic": "import anthropic",
}


def server_alone(url: str, chunks: int, repeats: int) -> dict[str, Any]:
    from child import socket_rate

    payload = {"model": f"bench-{chunks}", "max_tokens": 1, "messages": MESSAGES, "stream": True}
    return socket_rate(url, "/v1/messages", payload, b'"text_delta"', repeats)


if __name__ == "__main__":
    bench_openai.main(
        sys.argv[1:], serve_=serve, clients=CLIENTS, imports=IMPORTS, alone=server_alone
    )
