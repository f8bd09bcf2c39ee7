"""ollm serve against calling the backend directly, and beside LiteLLM's proxy, in one run.

    python benchmarks/bench_serve.py [--requests N] [--litellm PATH_TO_litellm]

The backend is benchmarks/server.py (the fake Ollama server in its own process, replies
built in advance). ``ollm serve -p ollama`` runs in its own process in front of it, and,
when the ``litellm`` command is found (benchmarks/.venv, or ``--litellm``), LiteLLM's proxy
too, on the same backend. One raw httpx client measures each:

- added latency per request: a one-chunk reply not streamed (``bench-1``), one client in
  turn and 100 at once; p50 and p99 of each path, and the difference with the direct one;
- streamed chunks per second: a 20,000-chunk reply, streamed to one client.

Timing never appears in the test suite: run this on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STREAM_CHUNKS = 20_000
PROMPT = [{"role": "user", "content": "Hi"}]
# LiteLLM's proxy refuses to start without a master key; every path gets the header (ollm
# serve without keys, and the backend, ignore it), so that each request is alike.
KEY = "sk-bench-" + "0" * 32
HEADERS = {"authorization": f"Bearer {KEY}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, process: subprocess.Popen[Any]) -> None:
    for _ in range(600):
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} ended with {process.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} never answered")


def start_backend() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(HERE / "server.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def start_ollm_serve(backend: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    ollm = str(Path(sys.executable).with_name("ollm"))
    env = {**os.environ, "OLLAMA_HOST": backend, "OLLM_LOGS": "off"}
    process = subprocess.Popen(
        [ollm, "serve", "-p", "ollama", "--port", str(port), "--max-concurrent", "1000"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_up(url + "/api/version", process)
    return process, url


def start_litellm(command: str, backend: str, folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    models = "\n".join(
        f"  - model_name: {name}\n"
        f"    litellm_params: {{model: ollama_chat/{name}, api_base: {backend}}}"
        for name in ("bench-1", f"bench-{STREAM_CHUNKS}")
    )
    config = folder / "litellm.yaml"
    config.write_text(f"model_list:\n{models}\n")
    env = {
        **os.environ,
        # No download of the price list at start, no telemetry: the machine is offline.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "LITELLM_MASTER_KEY": KEY,
    }
    process = subprocess.Popen(
        [command, "--config", str(config), "--port", str(port), "--num_workers", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(folder / "litellm.log").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_up(url + "/health/liveliness", process)
    # Its first request builds its router: not part of what is measured.
    httpx.post(
        url + "/v1/chat/completions",
        json=openai_body("bench-1", False),
        headers=HEADERS,
        timeout=120,
    )
    return process, url


def ollama_body(model: str, stream: bool) -> dict[str, Any]:
    return {"model": model, "messages": PROMPT, "stream": stream}


def openai_body(model: str, stream: bool) -> dict[str, Any]:
    return {"model": model, "messages": PROMPT, "stream": stream}


def ollama_chunk(line: str) -> bool:
    return line.startswith("{") and '"done":false' in line.replace(" ", "")


def openai_chunk(line: str) -> bool:
    return line.startswith("data: {") and '"content":"' in line.replace(" ", "")


async def latencies(
    url: str, make: Callable[[str, bool], dict[str, Any]], clients: int, each: int
) -> list[float]:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    found: list[float] = []
    async with httpx.AsyncClient(limits=limits, timeout=120, headers=HEADERS) as http:
        body = make("bench-1", False)

        async def one() -> None:
            response = await http.post(url, json=body)
            response.raise_for_status()

        await one()  # warm the connection and the server's pools

        async def client() -> None:
            for _ in range(each):
                start = time.perf_counter()
                await one()
                found.append(time.perf_counter() - start)

        async with anyio.create_task_group() as group:
            for _ in range(clients):
                group.start_soon(client)
    return found


async def chunks_per_second(
    url: str, make: Callable[[str, bool], dict[str, Any]], counts: Callable[[str], bool]
) -> tuple[float, int]:
    async with httpx.AsyncClient(timeout=300, headers=HEADERS) as http:
        start = time.perf_counter()
        seen = 0
        async with http.stream("POST", url, json=make(f"bench-{STREAM_CHUNKS}", True)) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                seen += counts(line)
        return seen / (time.perf_counter() - start), seen


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300, help="requests of the one client")
    parser.add_argument("--litellm", default=None, help="the litellm command (its proxy)")
    args = parser.parse_args()
    litellm = args.litellm or shutil.which("litellm", path=str(HERE / ".venv" / "bin"))
    folder = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    backend, backend_url = start_backend()
    processes: list[subprocess.Popen[Any]] = [backend]
    try:
        serve, serve_url = start_ollm_serve(backend_url)
        processes.append(serve)
        paths: dict[
            str, tuple[str, Callable[[str, bool], dict[str, Any]], Callable[[str], bool]]
        ] = {
            "direct (Ollama /api/chat)": (backend_url + "/api/chat", ollama_body, ollama_chunk),
            "ollm serve /api/chat": (serve_url + "/api/chat", ollama_body, ollama_chunk),
            "ollm serve /v1/chat/completions": (
                serve_url + "/v1/chat/completions",
                openai_body,
                openai_chunk,
            ),
        }
        litellm_note = (
            "not measured: no litellm command (pip install 'litellm[proxy]' in benchmarks/.venv)"
        )
        if litellm:
            try:
                proxy, proxy_url = start_litellm(litellm, backend_url, folder)
                processes.append(proxy)
                paths["LiteLLM proxy /v1/chat/completions"] = (
                    proxy_url + "/v1/chat/completions",
                    openai_body,
                    openai_chunk,
                )
                litellm_note = f"litellm at {litellm}"
            except RuntimeError as exc:
                litellm_note = f"LiteLLM's proxy did not start: {exc} (see {folder}/litellm.log)"
        results: dict[str, Any] = {"litellm": litellm_note}
        for name, (url, make, counts) in paths.items():
            one = anyio.run(latencies, url, make, 1, args.requests)
            many = anyio.run(latencies, url, make, 100, max(1, args.requests // 30))
            rate, seen = anyio.run(chunks_per_second, url, make, counts)
            results[name] = {
                "p50_1_ms": statistics.median(one) * 1e3,
                "p99_1_ms": quantile(one, 0.99) * 1e3,
                "p50_100_ms": statistics.median(many) * 1e3,
                "p99_100_ms": quantile(many, 0.99) * 1e3,
                "chunks_per_s": rate,
                "chunks": seen,
            }
        print(json.dumps(results, indent=2))
        report(results)
    finally:
        for process in reversed(processes):
            if process is backend and backend.stdin is not None:
                backend.stdin.close()
            process.terminate()
            process.wait(timeout=30)


def report(results: dict[str, Any]) -> None:
    direct = results["direct (Ollama /api/chat)"]
    print()
    print(
        "| path | p50, 1 client | p99, 1 client | p50, 100 clients | p99, 100 clients "
        "| chunks/s (20,000 streamed) |"
    )
    print("|---|---|---|---|---|---|")
    for name, row in results.items():
        if not isinstance(row, dict):
            continue
        added = "" if row is direct else f" (+{row['p50_1_ms'] - direct['p50_1_ms']:.2f})"
        print(
            f"| {name} | {row['p50_1_ms']:.2f} ms{added} | {row['p99_1_ms']:.2f} ms | "
            f"{row['p50_100_ms']:.1f} ms | {row['p99_100_ms']:.1f} ms | "
            f"{row['chunks_per_s']:,.0f} ({row['chunks']:,}) |"
        )
    print(f"\n{results['litellm']}")


if __name__ == "__main__":
    main()
