"""Cassettes (issue 45): replaying 1,000 recorded chats against running them on the fake
servers directly, in one run.

Each chat is one streamed request of the production provider (``OpenAIProvider`` on the
OpenAI wire, ``OllamaProvider`` on Ollama's) with a prompt of its own and a reply of 8
pieces. "Direct" runs the 1,000 chats against the fake server, which builds each reply
from its script; "replay" loads the cassette recorded from those chats (its time
included), keys each request (canonical JSON, secrets scrubbed, SHA-256) and writes the
recorded frames through the same fake server over the same loopback HTTP. The ratio is
replay / direct: below 1 is faster than direct.

Run: ``.venv/bin/python benchmarks/bench_cassette.py [CHATS] [REPEATS]`` (not part of
``./ollmw bench``).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

import ollm
from ollm_ollama import OllamaProvider
from ollm_openai import OpenAIProvider
from ollm_testutils import FakeOllamaServer, FakeOpenAIServer, OllamaReply, OpenAIReply
from ollm_testutils.cassette import Cassette
from ollm_testutils.httpserver import FakeServer

PIECES = 8


def words(body: dict[str, Any]) -> list[str]:
    prompt = body["messages"][-1]["content"]
    return [f"{prompt} piece {n} " for n in range(PIECES)]


WIRES: dict[str, tuple[Callable[[], FakeServer], Callable[[str], Any], str, str]] = {
    "openai": (
        lambda: FakeOpenAIServer(models=["gpt-test"]).reply_with(lambda b: OpenAIReply(words(b))),
        lambda url: OpenAIProvider(url, api_key="none", environ={}),
        "gpt-test",
        "/v1",
    ),
    "ollama": (
        lambda: FakeOllamaServer().reply_with(lambda b: OllamaReply(words(b))),
        lambda url: OllamaProvider(host=url),
        "llama3.2",
        "",
    ),
}


async def chats(provider: Any, model: str, count: int) -> int:
    pieces = 0
    async with provider:
        for n in range(count):
            request = ollm.ProviderRequest(
                model=model, messages=(ollm.Message.user(f"question {n}"),)
            )
            async for event in provider.chat_stream(request):
                if isinstance(event, ollm.ErrorEvent):
                    raise RuntimeError(event.message)
                pieces += isinstance(event, ollm.TextEvent)
    return pieces


def run(wire: str, count: int, repeats: int) -> dict[str, Any]:
    make_server, make_provider, model, prefix = WIRES[wire]
    direct: list[float] = []
    replay: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chats.json"
        with make_server() as server:
            upstream = f"{server.url}{prefix}"
            with Cassette(path, mode="all") as cassette:
                anyio.run(chats, make_provider(cassette.url(upstream, wire=wire)), model, count)
            for _ in range(repeats):
                start = time.perf_counter()
                anyio.run(chats, make_provider(upstream), model, count)
                direct.append(time.perf_counter() - start)
        for _ in range(repeats):
            start = time.perf_counter()
            with Cassette(path) as cassette:
                anyio.run(chats, make_provider(cassette.url(upstream, wire=wire)), model, count)
            replay.append(time.perf_counter() - start)
            cassette.check()
        size = path.stat().st_size
    d, r = statistics.median(direct), statistics.median(replay)
    return {
        "wire": wire,
        "chats": count,
        "direct_s": round(d, 3),
        "replay_s": round(r, 3),
        "ratio": round(r / d, 2),
        "cassette_kib": size // 1024,
    }


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    for wire in WIRES:
        row = run(wire, count, repeats)
        print(
            f"{row['wire']:7} {row['chats']} chats: direct {row['direct_s']:.2f} s, "
            f"replay {row['replay_s']:.2f} s (cassette {row['cassette_kib']} KiB): "
            f"ratio {row['ratio']:.2f}"
        )


if __name__ == "__main__":
    main()
