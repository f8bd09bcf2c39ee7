"""Parallel tools: 8 tools of 200 ms (4 sync in threads, 4 async) in one turn.

    python benchmarks/bench_tools.py

The chat's whole time over the slowest tool's 200 ms; the target is at most 1.3.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import anyio

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

DELAY = 0.2


@ollm.tool
async def wait_async(i: int) -> int:
    """Sleep 200 ms."""
    await anyio.sleep(DELAY)
    return i


@ollm.tool
def wait_sync(i: int) -> int:
    """Sleep 200 ms in a worker thread."""
    time.sleep(DELAY)
    return i


async def one_chat() -> float:
    calls = [("wait_async" if i % 2 else "wait_sync", {"i": i}) for i in range(8)]
    provider = ScriptedProvider(Reply(tool_calls=calls), "done")
    client = ollm.ChatClient(ollm.Registries(), provider=provider, tools=[wait_async, wait_sync])
    started = time.perf_counter()
    result = await client.run("go")
    elapsed = time.perf_counter() - started
    assert [r.result for r in result.tool_results] == [str(i) for i in range(8)], result
    return elapsed


def run(repeats: int = 5, backends: tuple[str, ...] = ("asyncio", "trio")) -> list[dict[str, Any]]:
    rows = []
    for backend in backends:
        anyio.run(one_chat, backend=backend)  # warm: worker threads exist
        times = [anyio.run(one_chat, backend=backend) for _ in range(repeats)]
        rows.append(
            {
                "backend": backend,
                "median_s": statistics.median(times),
                "min_s": min(times),
                "max_s": max(times),
                "ratio": statistics.median(times) / DELAY,
            }
        )
    return rows


if __name__ == "__main__":
    for row in run():
        print(
            f"{row['backend']:8} {row['median_s'] * 1000:.0f} ms "
            f"[{row['min_s'] * 1000:.0f}-{row['max_s'] * 1000:.0f}]  "
            f"ratio to the slowest tool {row['ratio']:.2f} (target <= 1.3)"
        )
