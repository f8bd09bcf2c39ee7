"""OpenAI-compatible streaming: ollm against the official `openai` SDK and litellm, one run.

    python bench_openai.py serve             prints its URL, serves until stdin closes
    python bench_openai.py client NAME URL CHUNKS REPEATS BACKEND
    python bench_openai.py import NAME       time to import a client (ms)

The server speaks SSE exactly as vLLM frames it (one ``data:`` event per HTTP chunk, a
``chat.completion.chunk`` per token, a usage chunk, ``data: [DONE]``), with every body
encoded in advance and written in large writes, so that it is never the limit: the
"server alone" row (a client that only reads the bytes) shows its rate. Each client
runs in a fresh process, opened once and warmed, as an application would.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from typing import Any

SIZES = (2, 2_000, 20_000, 100_000)


# -- the server ------------------------------------------------------------------------


def _body(chunks: int) -> bytes:
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": ""}
    events = []
    for i in range(chunks):
        value = {
            **head,
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": f"{i % 1000:03d} "},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        events.append(b"data: " + json.dumps(value).encode() + b"\n\n")
    end = {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    usage = {**head, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": chunks}}
    events += [b"data: " + json.dumps(v).encode() + b"\n\n" for v in (end, usage)]
    events.append(b"data: [DONE]\n\n")
    return b"".join(b"%x\r\n%b\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


def serve() -> None:
    from ollm_testutils.httpserver import HttpServer

    bodies = {f"bench-{n}": _body(n) for n in SIZES}
    models = json.dumps({"object": "list", "data": [{"id": m} for m in bodies]}).encode()

    def handle(request: Any, response: Any, connection: Any) -> None:
        if request.path.endswith("/models"):
            response.send(200, models, "application/json")
            return
        body = bodies[json.loads(request.body)["model"]]
        response.start_chunked(200, "text/event-stream; charset=utf-8")
        for start in range(0, len(body), 1 << 20):
            response.write_framed(body[start : start + (1 << 20)])
        response.finished = True

    server = HttpServer(handle)
    server.start()
    print(f"http://127.0.0.1:{server.port}/v1", flush=True)
    sys.stdin.read()
    server.stop()


# -- the clients -----------------------------------------------------------------------

MESSAGES = [{"role": "user", "content": "go"}]


class Ollm:
    async def open(self, url: str) -> None:
        import ollm
        from ollm_openai import OpenAIProvider

        self.text = ollm.TextEvent
        self.provider = OpenAIProvider(url, api_key="bench", environ={})
        self.client = ollm.ChatClient(ollm.Registries(), provider=self.provider)

    async def stream(self, model: str) -> int:
        count = 0
        text = self.text
        async with self.client.chat("go", model=model) as events:
            async for event in events:
                if type(event) is text:
                    count += 1
        self.client.conversation.clear()
        return count

    async def close(self) -> None:
        await self.provider.aclose()


class OpenAISDK:
    async def open(self, url: str) -> None:
        from openai import AsyncOpenAI

        self.client = AsyncOpenAI(base_url=url, api_key="bench", max_retries=0)

    async def stream(self, model: str) -> int:
        count = 0
        stream = await self.client.chat.completions.create(
            model=model,
            messages=MESSAGES,
            stream=True,  # type: ignore[arg-type]
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                count += 1
        return count

    async def close(self) -> None:
        await self.client.close()


class LiteLLM:
    async def open(self, url: str) -> None:
        import litellm

        litellm.suppress_debug_info = True
        self.litellm = litellm
        self.url = url

    async def stream(self, model: str) -> int:
        count = 0
        response = await self.litellm.acompletion(
            model=f"openai/{model}",
            api_base=self.url,
            api_key="bench",
            messages=MESSAGES,
            stream=True,
        )
        async for chunk in response:
            if chunk.choices and chunk.choices[0].delta.content:
                count += 1
        return count

    async def close(self) -> None:
        return None


class RawHttpx:
    """httpx + ``aiter_lines`` + msgspec: the floor of any Python client on httpx."""

    async def open(self, url: str) -> None:
        import httpx
        import msgspec

        self.http = httpx.AsyncClient(base_url=url, timeout=60)
        self.decode = msgspec.json.decode

    async def stream(self, model: str) -> int:
        count = 0
        body = {"model": model, "messages": MESSAGES, "stream": True}
        async with self.http.stream("POST", "/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunk = self.decode(line[6:])
                    choices = chunk.get("choices")
                    if choices and choices[0]["delta"].get("content"):
                        count += 1
        return count

    async def close(self) -> None:
        await self.http.aclose()


CLIENTS = {"ollm": Ollm, "openai": OpenAISDK, "litellm": LiteLLM, "raw-httpx": RawHttpx}
IMPORTS = {
    "ollm_openai": "import ollm, ollm_openai",
    "openai": "import openai",
    "litellm": "import litellm",
}


def server_alone(url: str, chunks: int, repeats: int) -> dict[str, Any]:
    from child import socket_rate

    payload = {"model": f"bench-{chunks}", "messages": MESSAGES, "stream": True}
    return socket_rate(url, "/v1/chat/completions", payload, b'"content"', repeats)


def client(
    name: str, url: str, chunks: int, repeats: int, backend: str, clients: dict[str, Any]
) -> dict[str, Any]:
    """Chunks per second of the client ``name`` (one of ``clients``), warmed, in this process."""
    import anyio

    model = f"bench-{chunks}"

    async def run() -> dict[str, Any]:
        instance = clients[name]()
        await instance.open(url)
        try:
            assert await instance.stream(model) == chunks  # warm: pool, caches, imports
            walls, cpus = [], []
            for _ in range(repeats):
                wall, cpu = time.perf_counter(), time.process_time()
                count = await instance.stream(model)
                assert count == chunks, count
                walls.append(count / (time.perf_counter() - wall))
                cpus.append(count / (time.process_time() - cpu))
            rss = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
            return {"rates": walls, "cpu_rates": cpus, "rss_kb": rss}
        finally:
            await instance.close()

    return anyio.run(run, backend=backend)


def import_time(statement: str) -> dict[str, Any]:
    import subprocess

    samples = []
    for _ in range(7):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], check=True)
        samples.append((time.perf_counter() - started) * 1000.0)
    return {"ms": samples}


def main(
    argv: list[str],
    *,
    serve_: Any = None,
    clients: dict[str, Any] | None = None,
    imports: dict[str, str] | None = None,
    alone: Any = None,
) -> None:
    """The modes of a streaming benchmark script: serve, client, socket, import."""
    mode = argv[0]
    if mode == "serve":
        (serve_ or serve)()
        return
    if mode == "client":
        result = client(argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5], clients or CLIENTS)
    elif mode == "socket":
        result = (alone or server_alone)(argv[1], int(argv[2]), int(argv[3]))
    elif mode == "import":
        result = import_time((imports or IMPORTS)[argv[1]])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    result["median"] = statistics.median(result.get("rates") or result.get("ms") or [0])
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
