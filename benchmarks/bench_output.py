"""Typed output's cost: a 1 MB JSON object streamed in 10,000 chunks, with partial output.

    python benchmarks/bench_output.py [--repeats N]

The same reply goes through ``ChatClient.chat`` twice: as plain text, and with
``output=`` a struct of its type, which reads the value as it streams (a
``PartialOutputEvent`` whenever a batch of chunks changed it) and validates the whole
at its end. Both stream from a fake Ollama server in another process (``OllamaProvider``,
the client's CPU time measured, as an application would see it), and from an in-memory
provider (the runtime alone, where nothing dilutes typed output's own work). The target,
on the server: the typed stream costs at most 2x the plain one, which only an
incremental reader meets (a re-parse of the text so far per chunk would be quadratic:
10,000 parses of 0.5 MB on average).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import time
from typing import Any

import anyio
import msgspec

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

CHUNKS = 10_000
TARGET = 2.0


class Item(msgspec.Struct):
    id: int
    name: str
    score: float
    tags: list[str]
    active: bool


class Catalog(msgspec.Struct):
    title: str
    items: list[Item]


def reply_text() -> str:
    """About 1 MB of JSON: a catalog of items with strings, numbers, lists, booleans."""
    items = [
        Item(
            i, f"item number {i} with a longer name", i * 0.5, ["red", "green", "blue"], i % 2 == 0
        )
        for i in range(8_500)
    ]
    return msgspec.json.encode(Catalog("A catalog", items)).decode()


def pieces(text: str) -> list[str]:
    cuts = [len(text) * i // CHUNKS for i in range(CHUNKS + 1)]
    return [text[a:b] for a, b in itertools.pairwise(cuts)]


def serve() -> None:
    """A fake Ollama server answering every chat with the reply; prints its URL."""
    from ollm_testutils import FakeOllamaServer, OllamaReply

    reply = OllamaReply(pieces(reply_text()), bulk=True)
    with FakeOllamaServer(models=False) as server:
        server.add_model("bench-json", ["completion"], context_length=1 << 30)
        server.reply_with(lambda body: reply)
        print(server.url, flush=True)
        sys.stdin.read()  # serve until the parent closes our stdin


def provider_of(url: str | None, chunks: list[str]) -> ollm.ProviderAdapter:
    if url is None:
        return ScriptedProvider(Reply(chunks), repeat_last=True)
    from ollm_ollama import OllamaProvider

    return OllamaProvider(url, environ={})


async def stream(chunks: list[str], output: Any, url: str | None = None) -> tuple[int, int]:
    provider = provider_of(url, chunks)
    client = ollm.ChatClient(
        ollm.Registries(), provider=provider, model="bench-json", context_window=1 << 30
    )
    texts = partials = 0
    async for event in client.chat("go", output=output):
        if type(event) is ollm.TextEvent:
            texts += 1
        elif type(event) is ollm.PartialOutputEvent:
            partials += 1
        elif type(event) is ollm.ErrorEvent:
            raise RuntimeError(event.message)
    return texts, partials


def once(chunks: list[str], output: Any, backend: str, url: str | None) -> float:
    """CPU seconds of one chat (CPU time: the machine is shared)."""

    async def run() -> float:
        started = time.process_time()
        texts, partials = await stream(chunks, output, url)
        elapsed = time.process_time() - started
        assert texts == CHUNKS, texts
        assert output is None or partials > 100, partials
        return elapsed

    return anyio.run(run, backend=backend)


def run(repeats: int = 7, backends: tuple[str, ...] = ("asyncio", "trio")) -> list[dict[str, Any]]:
    """Plain and typed on each backend and source, runs interleaved; the report's rows."""
    text = reply_text()
    chunks = pieces(text)
    server = subprocess.Popen(
        [sys.executable, __file__, "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    assert server.stdin is not None
    url = server.stdout.readline().strip()
    rows = []
    try:
        for source, where in (("fake Ollama server", url), ("in-memory provider", None)):
            for backend in backends:
                once(chunks, None, backend, where)  # warm up imports and caches
                once(chunks, Catalog, backend, where)
                plain: list[float] = []
                typed: list[float] = []
                for _ in range(repeats):
                    plain.append(once(chunks, None, backend, where))
                    typed.append(once(chunks, Catalog, backend, where))
                rows.append(
                    {
                        "source": source,
                        "backend": backend,
                        "bytes": len(text),
                        "chunks": CHUNKS,
                        "plain_ms": statistics.median(plain) * 1000,
                        "typed_ms": statistics.median(typed) * 1000,
                        "ratio": statistics.median(typed) / statistics.median(plain),
                        "target": TARGET if where is not None else None,
                    }
                )
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    return rows


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        serve()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    for row in run(args.repeats):
        target = f" (target <= {TARGET:.1f})" if row["target"] else ""
        print(
            f"{row['source']:19} {row['backend']:8} {row['bytes'] / 1e6:.2f} MB in "
            f"{row['chunks']} chunks: plain {row['plain_ms']:.0f} ms, with partial output "
            f"{row['typed_ms']:.0f} ms: ratio {row['ratio']:.2f}{target}"
        )


if __name__ == "__main__":
    main()
