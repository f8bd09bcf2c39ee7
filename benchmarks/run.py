"""Every benchmark, side by side with the peers, in one run; writes benchmarks/RESULTS.md.

    ./ollmw bench            (sets up benchmarks/.venv with the peers, then runs this)
    ./ollmw bench --quick    (fewer repeats, smaller streams: a smoke run)

Each client runs in a fresh process against the same loopback fake Ollama server, which
itself runs in another process with its replies built in advance.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PY = sys.executable
BIN = Path(sys.executable).parent


class Server:
    """The benchmark server in its own process."""

    def __enter__(self) -> Server:
        self.process = subprocess.Popen(
            [PY, str(HERE / "server.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http://"):
            raise SystemExit("the benchmark server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


def child(*args: object, script: str = "child.py") -> dict[str, Any]:
    """Run one measurement in a fresh process (benchmarks/child.py, or ``script``)."""
    out = subprocess.run(
        [PY, str(HERE / script), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=1800,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{script} {args} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def throughput(url: str, quick: bool) -> dict[str, Any]:
    big = 20_000 if quick else 100_000
    repeats = 2 if quick else 5
    plan = [
        ("ollm", "ollm", "asyncio", big, repeats),
        ("ollm (trio)", "ollm", "trio", big, repeats),
        ("ollm on httpx's own stack", "ollm-httpx", "asyncio", big, repeats),
        (
            "ollm on the hand-written transport ollm-http replaced",
            "ollm-legacy",
            "asyncio",
            big,
            repeats,
        ),
        ("raw httpx + msgspec (aiter_lines)", "raw-httpx", "asyncio", big, repeats),
        ("ollama AsyncClient", "ollama", "asyncio", big, repeats),
        ("ollama Client (sync)", "ollama-sync", "asyncio", big, repeats),
        ("langchain-ollama ChatOllama.astream", "langchain", "asyncio", 20_000, 2),
        ("litellm acompletion (ollama_chat/)", "litellm", "asyncio", 20_000, 2),
    ]
    rows = {}
    server = child("socket", url, big, repeats)
    rows["server alone (a client that only reads)"] = {**spread(server["rates"]), "chunks": big}
    for label, name, backend, chunks, count in plan:
        result = child("throughput", name, url, chunks, count, backend)
        rows[label] = {
            **spread(result["rates"]),
            "cpu_median": statistics.median(result["cpu_rates"]),
            "chunks": chunks,
        }
    return rows


def ttft(url: str, quick: bool) -> dict[str, Any]:
    iterations = 50 if quick else 300
    rows = {}
    for label, name in (
        ("ollm", "ollm"),
        ("raw httpx + msgspec", "raw-httpx"),
        ("ollama AsyncClient", "ollama"),
    ):
        rows[label] = spread(child("ttft", name, url, iterations, "asyncio")["ttft_ms"])
    return rows


def memory(url: str, quick: bool) -> dict[str, Any]:
    sizes = (20_000, 40_000) if quick else (100_000, 200_000)
    rows = {}
    for label, name in (
        ("ollm", "ollm"),
        ("raw httpx + msgspec", "raw-httpx"),
        ("ollama AsyncClient", "ollama"),
    ):
        peaks = [child("memory", name, url, n, "asyncio")["rss_kb"] for n in sizes]
        rows[label] = {"sizes": sizes, "peak_kb": peaks}
    return rows


def concurrency(url: str, quick: bool) -> dict[str, Any]:
    streams = 50 if quick else 200
    rows = {}
    for label, name, backend in (
        ("ollm", "ollm", "asyncio"),
        ("ollm (trio)", "ollm", "trio"),
        ("ollama AsyncClient", "ollama", "asyncio"),
    ):
        result = child("concurrency", name, url, streams, 2_000, backend)
        rows[label] = {**spread(result["rates"]), "streams": streams}
    return rows


def startup(quick: bool) -> dict[str, Any]:
    runs = 5 if quick else 15
    commands = {
        'python -c "import anyio"': [PY, "-c", "import anyio"],
        'python -c "import httpx"': [PY, "-c", "import httpx"],
        "ollm chat -p echo hi (logged)": [str(BIN / "ollm"), "chat", "-p", "echo", "hi"],
        "ollm chat -p echo hi --no-log": [
            str(BIN / "ollm"),
            "chat",
            "-p",
            "echo",
            "--no-log",
            "hi",
        ],
        "ollm --help": [str(BIN / "ollm"), "--help"],
        "ollm --version": [str(BIN / "ollm"), "--version"],
        "ollm plugins": [str(BIN / "ollm"), "plugins"],
        "import ollm + plugin discovery": [PY, "-c", "import ollm; ollm.discover()"],
        'python -c "import ollama"': [PY, "-c", "import ollama"],
        'python -c "import litellm"': [PY, "-c", "import litellm"],
        'python -c "import langchain_ollama"': [PY, "-c", "import langchain_ollama"],
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLLM_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have bytecode caches
    env["OLLM_LOGS_PATH"] = str(HERE / ".startup-logs.db")  # logging on, out of the user's way
    for command in commands.values():  # warm: bytecode, the plugin cache, the log's schema
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):  # interleaved, so that noise falls on all alike
        for name, command in commands.items():
            started = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            times[name].append((time.perf_counter() - started) * 1000.0)
    return {name: spread(values) for name, values in times.items()}


def whole_process(url: str, quick: bool) -> dict[str, Any]:
    """`ollm chat` as a program against the official client as a program, same reply."""
    chunks = 40_000 if quick else 200_000
    runs = 2 if quick else 5
    model = f"bench-{chunks}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "OLLAMA_"))}
    env["OLLAMA_HOST"] = url
    env["OLLM_LOGS"] = "off"
    commands = {
        "ollm chat": [str(BIN / "ollm"), "chat", "-m", model, "go"],
        "ollama AsyncClient program": [PY, str(HERE / "ollama_process.py"), url, model],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            started = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, env=env, check=True)
            times[name].append(time.perf_counter() - started)
    return {"chunks": chunks, **{name: spread(values) for name, values in times.items()}}


def streaming_section(
    script_name: str,
    clients: tuple[tuple[str, str, str], ...],
    imports: tuple[tuple[str, str], ...],
    quick: bool,
) -> dict[str, Any]:
    """One streaming benchmark script (bench_openai.py's modes): its server, clients, imports."""
    script = str(HERE / script_name)
    server = subprocess.Popen(
        [PY, script, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    assert server.stdin is not None
    url = server.stdout.readline().strip()

    def run_child(*args: object) -> dict[str, Any]:
        out = subprocess.run(
            [PY, script, *map(str, args)], capture_output=True, text=True, cwd=HERE, timeout=1800
        )
        if out.returncode != 0:
            raise RuntimeError(f"{script_name} {args} failed:\n{out.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return result

    chunks, repeats = (2_000, 2) if quick else (20_000, 5)
    rows: dict[str, Any] = {}
    try:
        alone = run_child("socket", url, chunks, repeats)
        rows["server alone (a client that only reads)"] = {**spread(alone["rates"])}
        for label, name, backend in clients:
            result = run_child("client", name, url, chunks, repeats, backend)
            rows[label] = {
                **spread(result["rates"]),
                "cpu_median": statistics.median(result["cpu_rates"]),
            }
        measured = {label: spread(run_child("import", name)["ms"]) for label, name in imports}
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    return {"chunks": chunks, "throughput": rows, "imports": measured}


def openai_compatible(quick: bool) -> dict[str, Any]:
    """ollm-openai against the openai SDK and litellm on one SSE server (vLLM's framing)."""
    return streaming_section(
        "bench_openai.py",
        (
            ("ollm (ChatClient + OpenAIProvider)", "ollm", "asyncio"),
            ("ollm (trio)", "ollm", "trio"),
            ("raw httpx + msgspec (aiter_lines)", "raw-httpx", "asyncio"),
            ("openai AsyncOpenAI", "openai", "asyncio"),
            ("litellm acompletion (openai/)", "litellm", "asyncio"),
        ),
        (
            ("import ollm, ollm_openai", "ollm_openai"),
            ("import openai", "openai"),
            ("import litellm", "litellm"),
        ),
        quick,
    )


def gemini(quick: bool) -> dict[str, Any]:
    """ollm-gemini against google-genai on one SSE server (the Gemini API's framing)."""
    return streaming_section(
        "bench_gemini.py",
        (
            ("ollm (ChatClient + GeminiProvider)", "ollm", "asyncio"),
            ("ollm (trio)", "ollm", "trio"),
            ("raw httpx + msgspec (aiter_lines)", "raw-httpx", "asyncio"),
            ("google-genai (client.aio)", "google-genai", "asyncio"),
        ),
        (
            ("import ollm, ollm_gemini", "ollm_gemini"),
            ("from google import genai", "google-genai"),
        ),
        quick,
    )


def anthropic(quick: bool) -> dict[str, Any]:
    """ollm-anthropic against the anthropic SDK on FakeAnthropicServer's bodies."""
    return streaming_section(
        "bench_anthropic.py",
        (
            ("ollm (ChatClient + AnthropicProvider)", "ollm", "asyncio"),
            ("ollm (trio)", "ollm", "trio"),
            ("raw httpx + msgspec (aiter_lines)", "raw-httpx", "asyncio"),
            ("anthropic AsyncAnthropic (raw events)", "anthropic", "asyncio"),
            ("anthropic messages.stream() (text events)", "anthropic-stream", "asyncio"),
        ),
        (
            ("import ollm, ollm_anthropic", "ollm_anthropic"),
            ("import anthropic", "anthropic"),
        ),
        quick,
    )


def script_figures(script: str, *args: object) -> dict[str, Any]:
    """The JSON line a benchmark script prints last (it runs in its own process)."""
    out = subprocess.run(
        [PY, str(HERE / script), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=1800,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def llamacpp(quick: bool) -> dict[str, Any]:
    """A model inside the process: ollm's runtime against llama-cpp-python's streaming."""
    repeats, tokens = (2, 50) if quick else (7, 200)
    return script_figures("bench_llamacpp.py", repeats, tokens)


def realserver(quick: bool) -> dict[str, Any]:
    """ollm against the openai SDK on llama-cpp-python's real server (bench_realserver.py)."""
    repeats, tokens = (2, 32) if quick else (5, 128)
    return script_figures("bench_realserver.py", repeats, tokens)


def pool(quick: bool) -> dict[str, Any]:
    """1,000 chats at once through a pool of three servers, against one provider (issue 34)."""
    script = "bench_pool.py"
    chats, chunks, repeats = (200, 50, 1) if quick else (1_000, 200, 5)
    server = subprocess.Popen(
        [PY, str(HERE / script), "serve", str(chunks)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    assert server.stdin is not None
    urls = ",".join(server.stdout.readline().split())
    runs: dict[str, list[dict[str, Any]]] = {"single": [], "pool": []}
    try:
        for _ in range(repeats):  # interleaved, so that noise falls on both alike
            for mode in runs:
                found = child("client", mode, urls, chats, chunks, "asyncio", script=script)
                runs[mode].append(found)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    result: dict[str, Any] = {"chats": chats, "chunks_per_chat": chunks}
    for mode, found in runs.items():
        result[mode] = {
            "cpu_us_per_chunk": spread([r["cpu_us_per_chunk"] for r in found]),
            "wall_s": spread([r["wall_s"] for r in found]),
            "rss_peak_kb": max(r["rss_peak_kb"] for r in found),
            "rss_growth_kb": max(r["rss_growth_kb"] for r in found),
            "last": found[-1],
        }
    single = result["single"]["cpu_us_per_chunk"]["median"]
    result["ratio"] = result["pool"]["cpu_us_per_chunk"]["median"] / single
    return result


def typed_output(quick: bool) -> dict[str, Any]:
    """Typed output: a 1 MB object in 10,000 chunks, plain and with partial output."""
    sys.path.insert(0, str(HERE))
    import bench_output

    return {"rows": bench_output.run(3 if quick else 9)}


SECTIONS = {
    "openai": openai_compatible,
    "gemini": gemini,
    "anthropic": anthropic,
    "startup": startup,
    "llamacpp": llamacpp,
    "realserver": realserver,
    "pool": pool,
    "output": typed_output,
}


def runtime_and_tools(quick: bool) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import bench_runtime
    import bench_tools

    result: dict[str, Any] = {"wall": bench_runtime.run(3 if quick else 9)}
    if shutil.which("valgrind") and not quick:
        result["instructions"] = [bench_runtime.instruction_ratio(b) for b in ("asyncio", "trio")]
    result["tools"] = bench_tools.run(3 if quick else 5)
    return result


def versions() -> dict[str, str]:
    names = [
        "ollm-core",
        "ollm-ollama",
        "ollm-openai",
        "openai",
        "ollm-gemini",
        "ollm-pool",
        "google-genai",
        "ollm-anthropic",
        "anthropic",
        "httpx",
        "anyio",
        "msgspec",
        "trio",
        "ollama",
        "litellm",
        "langchain-ollama",
        "langchain-core",
    ]
    found = {"python": platform.python_version(), "platform": platform.platform()}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    found["cpus"] = str(os.cpu_count())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--output", default=str(HERE / "RESULTS.md"))
    parser.add_argument(
        "--only",
        choices=sorted(SECTIONS),
        help="run one section only; its figures join the last full run's in RESULTS.md",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    if args.only is not None:
        # Its figures join the last full run's in results.json and RESULTS.md.
        section = SECTIONS[args.only](args.quick)
        if args.only != "startup":  # a table of commands: each key is a row
            section["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        print(json.dumps(section, indent=2))
        saved = HERE / "results.json"
        if saved.exists() and not args.quick:
            from report import write_report

            results = json.loads(saved.read_text())
            results[args.only] = section
            saved.write_text(json.dumps(results, indent=2) + "\n")
            Path(args.output).write_text(write_report(results))
        return
    results: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": versions(),
        "quick": args.quick,
    }
    with Server() as server:
        for name, step in (
            ("throughput", throughput),
            ("ttft", ttft),
            ("memory", memory),
            ("concurrency", concurrency),
            ("process", whole_process),
        ):
            print(f"{name}...", file=sys.stderr, flush=True)
            results[name] = step(server.url, args.quick)
    print("openai-compatible...", file=sys.stderr, flush=True)
    results["openai"] = openai_compatible(args.quick)
    print("gemini...", file=sys.stderr, flush=True)
    results["gemini"] = gemini(args.quick)
    print("anthropic...", file=sys.stderr, flush=True)
    results["anthropic"] = anthropic(args.quick)
    print("llamacpp...", file=sys.stderr, flush=True)
    results["llamacpp"] = llamacpp(args.quick)
    print("real server...", file=sys.stderr, flush=True)
    results["realserver"] = realserver(args.quick)
    print("pool...", file=sys.stderr, flush=True)
    results["pool"] = pool(args.quick)
    print("startup...", file=sys.stderr, flush=True)
    results["startup"] = startup(args.quick)
    print("typed output...", file=sys.stderr, flush=True)
    results["output"] = typed_output(args.quick)
    print("runtime and tools...", file=sys.stderr, flush=True)
    results["runtime"] = runtime_and_tools(args.quick)
    results["seconds"] = time.perf_counter() - started

    from report import write_report

    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    Path(args.output).write_text(write_report(results))
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
