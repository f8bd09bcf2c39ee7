"""A pool of three servers against one: 1,000 concurrent chats, CPU per chunk, memory, leaks.

    python bench_pool.py serve                         prints three URLs, serves until stdin closes
    python bench_pool.py client MODE URLS CHATS CHUNKS BACKEND    MODE: single or pool

Three fake Ollama servers in one process (``FakeOllamaServer``, replies of ``CHUNKS`` text
chunks encoded once and written in large writes). ``single`` runs ``CHATS`` chats at once
through one ``OllamaProvider`` on the first server; ``pool`` runs them through a
``PoolProvider`` of three ``OllamaProvider``s, one per server. Both go through the whole
runtime (``ChatClient.chat``, one conversation per chat), in a fresh process, after a
warm-up. Measured: the process's CPU time per text chunk, the wall time, the peak memory
(RSS) and what it grew by, the pool's spread of the chats over its members, and what is
left once the chats are over: requests in flight, tasks, and sockets (open idle
connections before ``aclose``, none after).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

MODEL = "bench-pool"


def serve(chunks: int = 200) -> None:
    from ollm_testutils import FakeOllamaServer, OllamaReply

    reply = OllamaReply([f"{i % 1000:03d} " for i in range(chunks)], bulk=True)
    servers = [FakeOllamaServer(models=False).start() for _ in range(3)]
    try:
        for server in servers:
            server.add_model(MODEL, ["completion", "tools"], context_length=1 << 20)
            server.default_reply = reply
        print(" ".join(server.url for server in servers), flush=True)
        sys.stdin.read()
    finally:
        for server in servers:
            server.stop()


def _sockets() -> int:
    """Sockets this process holds open (Linux: /proc/self/fd)."""
    folder = Path("/proc/self/fd")
    if not folder.exists():
        return -1
    count = 0
    for entry in folder.iterdir():
        try:
            count += os.readlink(entry).startswith("socket:")
        except OSError:
            continue
    return count


def _rss_kb() -> int:
    """The resident memory of this process now, in KiB (Linux), else its peak."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def client(mode: str, urls: list[str], chats: int, chunks: int, backend: str) -> dict[str, Any]:
    import anyio

    import ollm
    from ollm_ollama import OllamaProvider
    from ollm_pool import PoolProvider

    async def run() -> dict[str, Any]:
        baseline_sockets = _sockets()
        members = [
            OllamaProvider(url, environ={}) for url in (urls if mode == "pool" else urls[:1])
        ]
        provider: Any = PoolProvider(members) if mode == "pool" else members[0]
        chat_client = ollm.ChatClient(ollm.Registries(), provider=provider, model=MODEL)
        text = ollm.TextEvent

        async def one(counts: list[int]) -> None:
            count = 0
            async with chat_client.chat("go", conversation=ollm.Conversation()) as events:
                async for event in events:
                    if type(event) is text:
                        count += 1
            counts.append(count)

        async def many(number: int) -> list[int]:
            counts: list[int] = []
            async with anyio.create_task_group() as group:
                for _ in range(number):
                    group.start_soon(one, counts)
            return counts

        await many(30)  # warm: connections, caches, imports, the models loaded
        tasks_before = _tasks(backend)
        rss_before = _rss_kb()
        wall, cpu = time.perf_counter(), time.process_time()
        counts = await many(chats)
        cpu = time.process_time() - cpu
        wall = time.perf_counter() - wall
        total = sum(counts)
        assert total == chats * chunks, (total, chats * chunks)
        result: dict[str, Any] = {
            "mode": mode,
            "backend": backend,
            "chats": chats,
            "chunks": total,
            "cpu_us_per_chunk": cpu / total * 1e6,
            "wall_s": wall,
            "cpu_s": cpu,
            "rss_peak_kb": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss),
            "rss_growth_kb": _rss_kb() - rss_before,
            "tasks_left": _tasks(backend) - tasks_before,
            "sockets_open_idle": _sockets() - baseline_sockets,
        }
        if isinstance(provider, PoolProvider):
            status = provider.status()
            result["in_flight_left"] = sum(s.in_flight for s in status)
            result["attempts_per_member"] = [s.attempts for s in status]
            result["circuits"] = sorted({s.state for s in status})
        await provider.aclose()
        await anyio.sleep(0.2)  # the closed sockets' last packets
        result["sockets_after_close"] = _sockets() - baseline_sockets
        return result

    return anyio.run(run, backend=backend)


def _tasks(backend: str) -> int:
    """Tasks alive now (asyncio), or -1 where the backend cannot say."""
    if backend != "asyncio":
        return -1
    import asyncio

    return len(asyncio.all_tasks())


def main(argv: list[str]) -> None:
    if argv[0] == "serve":
        serve(int(argv[1]) if len(argv) > 1 else 200)
        return
    if argv[0] != "client":
        raise SystemExit(f"unknown mode {argv[0]!r}")
    mode, urls, chats, chunks, backend = argv[1], argv[2].split(","), *argv[3:6]
    print(json.dumps(client(mode, urls, int(chats), int(chunks), backend)))


if __name__ == "__main__":
    main(sys.argv[1:])
