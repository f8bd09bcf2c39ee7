"""One measurement in a fresh process, printed as JSON (run by ``run.py``).

    python child.py throughput CLIENT URL CHUNKS REPEATS BACKEND
    python child.py ttft CLIENT URL ITERATIONS BACKEND
    python child.py memory CLIENT URL CHUNKS BACKEND
    python child.py concurrency CLIENT URL STREAMS CHUNKS BACKEND
    python child.py socket URL CHUNKS REPEATS

A fresh process per client keeps imports, pools and memory from leaking between them.
"""

from __future__ import annotations

import json
import resource
import socket
import statistics
import sys
import time
from typing import Any

import anyio
from clients import ASYNC_CLIENTS, ollama_sync_stream


def _rss_kb() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def throughput(name: str, url: str, chunks: int, repeats: int, backend: str) -> dict[str, Any]:
    model = f"bench-{chunks}"
    if name == "ollama-sync":
        ollama_sync_stream(url, model)  # warm
        walls, cpus = [], []
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            count = ollama_sync_stream(url, model)
            walls.append(count / (time.perf_counter() - wall))
            cpus.append(count / (time.process_time() - cpu))
        return {"rates": walls, "cpu_rates": cpus, "rss_kb": _rss_kb()}

    async def run() -> dict[str, Any]:
        client = ASYNC_CLIENTS[name]()
        await client.open(url)
        try:
            assert await client.stream(model) == chunks  # warm: pool, caches, imports
            walls, cpus = [], []
            for _ in range(repeats):
                wall, cpu = time.perf_counter(), time.process_time()
                count = await client.stream(model)
                walls.append(count / (time.perf_counter() - wall))
                cpus.append(count / (time.process_time() - cpu))
            return {"rates": walls, "cpu_rates": cpus, "rss_kb": _rss_kb()}
        finally:
            await client.close()

    return anyio.run(run, backend=backend)


def ttft(name: str, url: str, iterations: int, backend: str) -> dict[str, Any]:
    """Time from the start of a request to its first text chunk, warm (model bench-2)."""

    async def run() -> dict[str, Any]:
        client = ASYNC_CLIENTS[name]()
        await client.open(url)
        try:
            for _ in range(20):  # warm
                await client.stream("bench-2")
            samples: list[float] = []
            first: list[float] = []
            for _ in range(iterations):
                first.clear()
                started = time.perf_counter()
                await client.stream("bench-2", lambda: first.append(time.perf_counter()))
                samples.append((first[0] - started) * 1000.0)
            return {"ttft_ms": samples}
        finally:
            await client.close()

    return anyio.run(run, backend=backend)


def memory(name: str, url: str, chunks: int, backend: str) -> dict[str, Any]:
    """Peak RSS of a process that streamed one reply of ``chunks`` chunks."""

    async def run() -> dict[str, Any]:
        client = ASYNC_CLIENTS[name]()
        await client.open(url)
        try:
            await client.stream("bench-2")  # everything imported and connected
            before = _rss_kb()
            count = await client.stream(f"bench-{chunks}")
            assert count == chunks, count
            return {"rss_kb": _rss_kb(), "before_kb": before}
        finally:
            await client.close()

    return anyio.run(run, backend=backend)


def concurrency(name: str, url: str, streams: int, chunks: int, backend: str) -> dict[str, Any]:
    """``streams`` chats of ``chunks`` chunks at once through one client."""
    model = f"bench-{chunks}"

    async def run() -> dict[str, Any]:
        client = ASYNC_CLIENTS[name]()
        await client.open(url)
        counts: list[int] = []

        async def one() -> None:
            counts.append(await client.stream(model))

        try:
            await client.stream(model)  # warm
            rates = []
            for _ in range(3):
                counts.clear()
                started = time.perf_counter()
                async with anyio.create_task_group() as group:
                    for _ in range(streams):
                        group.start_soon(one)
                elapsed = time.perf_counter() - started
                assert counts == [chunks] * streams
                rates.append(sum(counts) / elapsed)
            return {"rates": rates}
        finally:
            await client.close()

    return anyio.run(run, backend=backend)


def raw_socket(url: str, chunks: int, repeats: int) -> dict[str, Any]:
    """The server's own rate: a client that only reads the bytes and counts the lines."""
    payload = {"model": f"bench-{chunks}", "messages": [{"role": "user", "content": "go"}]}
    return socket_rate(url, "/api/chat", payload, b'"done":false', repeats)


def socket_rate(
    url: str, path: str, payload: dict[str, Any], marker: bytes, repeats: int
) -> dict[str, Any]:
    """Markers per second read off a raw socket: what a server sends, with no client work."""
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    body = json.dumps(payload).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    rates = []
    for _ in range(repeats + 1):
        with socket.create_connection((host, int(port))) as sock:
            started = time.perf_counter()
            sock.sendall(head + body)
            count = 0
            while True:
                data = sock.recv(1 << 20)
                if not data:
                    break
                count += data.count(marker)
            rates.append(count / (time.perf_counter() - started))
    return {"rates": rates[1:]}


def main(argv: list[str]) -> None:
    mode = argv[0]
    if mode == "throughput":
        result = throughput(argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5])
    elif mode == "ttft":
        result = ttft(argv[1], argv[2], int(argv[3]), argv[4])
    elif mode == "memory":
        result = memory(argv[1], argv[2], int(argv[3]), argv[4])
    elif mode == "concurrency":
        result = concurrency(argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5])
    elif mode == "socket":
        result = raw_socket(argv[1], int(argv[2]), int(argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    result["median"] = statistics.median(result.get("rates") or result.get("ttft_ms") or [0])
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
