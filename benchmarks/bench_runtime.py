"""Runtime overhead: 100k text events from an in-memory provider, with and without ChatClient.

    python benchmarks/bench_runtime.py [--instructions]

The provider alone is iterated directly; through the runtime, the same provider's events
go through ``ChatClient.chat`` (turn bookkeeping, abort checks, history commit). The
target is that the runtime keeps at least 70% of the provider's raw rate.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

CHUNKS = 100_000


def _provider() -> tuple[ScriptedProvider, ollm.ProviderRequest]:
    reply = Reply([f"w{i % 10} " for i in range(CHUNKS)])
    provider = ScriptedProvider(reply, repeat_last=True)
    request = ollm.ProviderRequest("mock-model", (ollm.Message.user("go"),))
    return provider, request


async def provider_alone() -> int:
    provider, request = _provider()
    count = 0
    async for event in provider.chat_stream(request):
        if type(event) is ollm.TextEvent:
            count += 1
    return count


async def through_runtime() -> int:
    provider, _ = _provider()
    client = ollm.ChatClient(ollm.Registries(), provider=provider)
    count = 0
    async for event in client.chat("go"):
        if type(event) is ollm.TextEvent:
            count += 1
    return count


def _once(fn: Callable[[], Coroutine[Any, Any, int]], backend: str) -> float:
    """Events per second of CPU time for one run (CPU time: the machine is shared)."""

    async def run() -> tuple[int, float]:
        started = time.process_time()
        count = await fn()
        return count, time.process_time() - started

    count, elapsed = anyio.run(run, backend=backend)
    assert count == CHUNKS, count
    return count / elapsed


def run(repeats: int = 9, backends: tuple[str, ...] = ("asyncio", "trio")) -> list[dict[str, Any]]:
    """Both sides on each backend, runs interleaved; the rows of the report."""
    rows = []
    for backend in backends:
        raw: list[float] = []
        runtime: list[float] = []
        _once(provider_alone, backend)  # warm up imports and caches
        _once(through_runtime, backend)
        for _ in range(repeats):
            raw.append(_once(provider_alone, backend))
            runtime.append(_once(through_runtime, backend))
        rows.append(
            {
                "backend": backend,
                "provider_median": statistics.median(raw),
                "provider_min": min(raw),
                "provider_max": max(raw),
                "runtime_median": statistics.median(runtime),
                "runtime_min": min(runtime),
                "runtime_max": max(runtime),
                "ratio": statistics.median(runtime) / statistics.median(raw),
            }
        )
    return rows


def _instructions(mode: str, events: int, backend: str) -> int:
    """Instructions of one run of this script, counted by valgrind's callgrind."""
    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={folder}/out",
                sys.executable,
                __file__,
                "--pass",
                mode,
                str(events),
                backend,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
    match = re.search(r"Collected : (\d+)", out)
    assert match is not None, out
    return int(match.group(1))


def instruction_ratio(backend: str, events: int = 20_000) -> dict[str, Any]:
    """The runtime's share of the provider's rate, from instruction counts per event.

    Deterministic where wall-clock time is not (the machines are shared): each side is
    counted for 0 and for ``events`` events, and the difference divided by ``events``.
    """
    per_event = {}
    for mode in ("raw", "runtime"):
        empty = _instructions(mode, 0, backend)
        full = _instructions(mode, events, backend)
        per_event[mode] = (full - empty) / events
    return {
        "backend": backend,
        "provider_instructions": per_event["raw"],
        "runtime_instructions": per_event["runtime"],
        "ratio": per_event["raw"] / per_event["runtime"],
    }


def _one_pass(mode: str, events: int, backend: str) -> None:
    global CHUNKS
    CHUNKS = events
    anyio.run(provider_alone if mode == "raw" else through_runtime, backend=backend)


def main() -> None:
    if sys.argv[1:2] == ["--pass"]:
        _one_pass(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--instructions", action="store_true", help="also count with callgrind")
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind"):
        for backend in ("asyncio", "trio"):
            row = instruction_ratio(backend)
            print(
                f"{backend:8} instructions per event: provider {row['provider_instructions']:.0f}, "
                f"through ChatClient {row['runtime_instructions']:.0f}: ratio {row['ratio']:.2f}"
            )
    for row in run(args.repeats):
        print(
            f"{row['backend']:8} provider alone {row['provider_median'] / 1e3:8.0f}k ev/s "
            f"[{row['provider_min'] / 1e3:.0f}-{row['provider_max'] / 1e3:.0f}k]  "
            f"through ChatClient {row['runtime_median'] / 1e3:8.0f}k ev/s "
            f"[{row['runtime_min'] / 1e3:.0f}-{row['runtime_max'] / 1e3:.0f}k]  "
            f"ratio {row['ratio']:.2f} (target >= 0.70)"
        )


if __name__ == "__main__":
    main()
