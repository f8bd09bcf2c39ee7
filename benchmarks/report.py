"""RESULTS.md from one run's measurements: each target, the figures, and whether it is met."""

from __future__ import annotations

from typing import Any

TEXT_BYTES_PER_CHUNK = 4  # the server's pieces: "000 ", "001 "...


def _k(rate: float) -> str:
    return f"{rate / 1000:,.1f}k"


def _mark(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def write_report(r: dict[str, Any]) -> str:
    out: list[str] = []
    add = out.append
    v = r["versions"]
    add("# Benchmark results\n")
    add(
        f"Measured {r['date']} in one run of `./ollmw bench`"
        f"{' --quick (a smoke run: smaller and fewer)' if r['quick'] else ''}, "
        f"{r['seconds'] / 60:.0f} min, on {v['cpus']} CPUs ({v['platform']}, Python "
        f"{v['python']}). Every client ran in a fresh process against the same loopback fake "
        "Ollama server, itself in another process. Figures are medians with [min-max].\n"
    )
    add(
        "Versions: "
        + ", ".join(f"{k} {v[k]}" for k in v if k not in ("platform", "cpus", "python"))
        + ".\n"
    )

    summary: list[tuple[str, str, str, bool]] = []

    # 1. Throughput
    t = r["throughput"]
    ollm = t["ollm"]["median"]
    ollama = t["ollama AsyncClient"]["median"]
    raw = t["raw httpx + msgspec (aiter_lines)"]["median"]
    add("## 1. Streaming throughput\n")
    add(
        "Text chunks delivered per second while streaming one long reply (100k chunks; 20k "
        "for the two slowest peers). `ollm` counts the `TextEvent`s of `ChatClient.chat` "
        "with `OllamaProvider`, through the whole runtime. The server sends one NDJSON line "
        "per HTTP chunk, as Ollama does, from a body encoded in advance: the first row, a "
        "client that only reads bytes, shows the server is far from being the limit.\n"
    )
    add("| client | chunks/s (wall) | [min-max] | chunks/s (CPU) | vs ollama AsyncClient |")
    add("|---|---:|---|---:|---:|")
    for label, row in t.items():
        cpu = _k(row["cpu_median"]) if "cpu_median" in row else ""
        add(
            f"| {label} | {_k(row['median'])} | {_k(row['min'])}-{_k(row['max'])} | {cpu} | "
            f"{row['median'] / ollama:.2f}x |"
        )
    ratio = ollm / ollama
    summary.append(("1. throughput >= 6x ollama AsyncClient", f"{ratio:.1f}x", "6x", ratio >= 6))
    legacy = t.get("ollm on the hand-written transport ollm-http replaced")
    if legacy is not None:
        cost = legacy["cpu_median"] / t["ollm"]["cpu_median"]  # CPU per chunk, new / old
        summary.append(
            (
                "(issue 11) CPU per chunk within 1.2x of the transport it replaced",
                f"{cost:.2f}x",
                "<= 1.2x",
                cost <= 1.2,
            )
        )
    summary.append(
        (
            "(issue 4) >= raw httpx, and >= 1.3x ollama",
            f"{ollm / raw:.1f}x raw httpx",
            "1x",
            ollm >= raw,
        )
    )
    add("")

    p = r.get("process")
    if p is not None:
        add(f"### Whole programs on {p['chunks']:,} chunks\n")
        add(
            "`ollm chat` (a new process: imports, plugin discovery, the stream printed to a "
            "pipe) against a program that streams the same reply with `ollama.AsyncClient` "
            "and prints it.\n"
        )
        add("| program | s | [min-max] |")
        add("|---|---:|---|")
        for label in ("ollm chat", "ollama AsyncClient program"):
            row = p[label]
            add(f"| {label} | {row['median']:.2f} | {row['min']:.2f}-{row['max']:.2f} |")
        speed = p["ollama AsyncClient program"]["median"] / p["ollm chat"]["median"]
        summary.append(
            ("(issue 11) `ollm chat` process >= 4x ollama's", f"{speed:.1f}x", "4x", speed >= 4)
        )
        add("")

    # 2. TTFT
    f = r["ttft"]
    gap = f["ollm"]["median"] - f["raw httpx + msgspec"]["median"]
    add("## 2. Time to the first text event (warm)\n")
    add(
        "From the start of a request to its first text chunk, with the connection pool and "
        "caches warm (the client made 20 requests before).\n"
    )
    add("| client | ms | [min-max] |")
    add("|---|---:|---|")
    for label, row in f.items():
        add(f"| {label} | {row['median']:.3f} | {row['min']:.3f}-{row['max']:.3f} |")
    summary.append(
        ("2. first text within 0.3 ms of raw httpx", f"{gap:+.3f} ms", "<= +0.3 ms", gap <= 0.3)
    )
    add("")

    # 3. Startup
    s = r["startup"]
    anyio_ms = s['python -c "import anyio"']["median"]
    help_ms = s["ollm --help"]["median"]
    add("## 3. Start-up\n")
    add("Wall time of whole commands (new process each time, runs interleaved).\n")
    add("| command | ms | [min-max] | vs import anyio |")
    add("|---|---:|---|---:|")
    for label, row in s.items():
        add(
            f"| `{label}` | {row['median']:.0f} | {row['min']:.0f}-{row['max']:.0f} | "
            f"{row['median'] / anyio_ms:.2f}x |"
        )
    summary.append(
        (
            "3. `ollm --help` within 1.5x `import anyio`",
            f"{help_ms / anyio_ms:.2f}x",
            "1.5x",
            help_ms <= 1.5 * anyio_ms,
        )
    )
    chat = s.get("ollm chat -p echo hi (logged)")
    httpx_row = s.get('python -c "import httpx"')
    if chat is not None and httpx_row is not None:
        ratio = chat["median"] / httpx_row["median"]
        summary.append(
            (
                "(issue 16) `ollm chat -p echo hi`, logged, within 1.5x `import httpx`",
                f"{ratio:.2f}x",
                "1.5x",
                ratio <= 1.5,
            )
        )
    add("")

    # 4. Memory
    m = r["memory"]
    small, large = m["ollm"]["sizes"]
    ollm_peak = m["ollm"]["peak_kb"][0]
    raw_peak = m["raw httpx + msgspec"]["peak_kb"][0]
    growth_kb = m["ollm"]["peak_kb"][1] - m["ollm"]["peak_kb"][0]
    text_kb = (large - small) * TEXT_BYTES_PER_CHUNK / 1024
    add("## 4. Memory\n")
    add(
        f"Peak RSS of a process that streamed one reply of {small:,} and of {large:,} chunks. "
        "ollm keeps the reply, because it goes into the conversation's history; the peers "
        "throw it away. The reply grows as one string, resized in place as pieces arrive: "
        "no object is kept per event and nothing is copied at the end, so memory grows by "
        "the text and nothing more.\n"
    )
    add(f"| client | peak RSS, {small:,} chunks | peak RSS, {large:,} chunks | growth |")
    add("|---|---:|---:|---:|")
    for label, row in m.items():
        a, b = row["peak_kb"]
        add(f"| {label} | {a / 1024:.1f} MB | {b / 1024:.1f} MB | {b - a:+,} KB |")
    add(f"\nThe extra {large - small:,} chunks carry {text_kb:,.0f} KB of text.\n")
    summary.append(
        (
            "4. peak RSS <= 1.2x raw httpx",
            f"{ollm_peak / raw_peak:.2f}x",
            "1.2x",
            ollm_peak <= 1.2 * raw_peak,
        )
    )
    summary.append(
        (
            "4. no growth with length beyond the text (256 KB slack)",
            f"{growth_kb:,} KB for {text_kb:,.0f} KB of text",
            "<= text + 256 KB",
            growth_kb <= text_kb + 256,
        )
    )

    # 5. Concurrency
    c = r["concurrency"]
    streams = c["ollm"]["streams"]
    add("## 5. Concurrency\n")
    add(f"{streams} chats of 2,000 chunks each at once through one client; aggregate chunks/s.\n")
    add("| client | chunks/s | [min-max] | vs ollama AsyncClient |")
    add("|---|---:|---|---:|")
    base = c["ollama AsyncClient"]["median"]
    for label, row in c.items():
        spread = f"{_k(row['min'])}-{_k(row['max'])}"
        add(f"| {label} | {_k(row['median'])} | {spread} | {row['median'] / base:.2f}x |")
    ratio = c["ollm"]["median"] / base
    summary.append(
        (f"5. {streams} concurrent chats >= 3x ollama", f"{ratio:.1f}x", "3x", ratio >= 3)
    )
    add("")

    # 6 and 7. Tools and runtime
    rt = r["runtime"]
    add("## 6. Parallel tools\n")
    add("Eight tools of 200 ms (four sync, in worker threads; four async) called in one turn.\n")
    add("| backend | chat | [min-max] | vs the slowest tool |")
    add("|---|---:|---|---:|")
    worst = 0.0
    for row in rt["tools"]:
        worst = max(worst, row["ratio"])
        add(
            f"| {row['backend']} | {row['median_s'] * 1000:.0f} ms | {row['min_s'] * 1000:.0f}-"
            f"{row['max_s'] * 1000:.0f} | {row['ratio']:.2f}x |"
        )
    summary.append(("6. 8 tools within 1.3x the slowest", f"{worst:.2f}x", "1.3x", worst <= 1.3))
    add("")

    add("## 7. Runtime overhead\n")
    add(
        "100k text events from an in-memory provider (`ScriptedProvider`), through "
        "`ChatClient` and consumed directly from the provider. Wall-clock rates on a shared "
        "machine wander by 30%; instruction counts (valgrind's callgrind, 20k events, start-up "
        "subtracted) do not, so the target is judged on them when valgrind is there.\n"
    )
    add("| backend | provider alone | through ChatClient | ratio |")
    add("|---|---:|---:|---:|")
    for row in rt["wall"]:
        add(
            f"| {row['backend']} (CPU time) | {_k(row['provider_median'])} ev/s | "
            f"{_k(row['runtime_median'])} ev/s | {row['ratio']:.2f} |"
        )
    judged = [row["ratio"] for row in rt["wall"]]
    for row in rt.get("instructions", []):
        add(
            f"| {row['backend']} (instructions per event) | {row['provider_instructions']:,.0f} | "
            f"{row['runtime_instructions']:,.0f} | {row['ratio']:.2f} |"
        )
    if rt.get("instructions"):
        judged = [row["ratio"] for row in rt["instructions"]]
    summary.append(
        (
            "7. runtime keeps >= 70% of the provider's rate",
            f"{min(judged):.2f}",
            "0.70",
            min(judged) >= 0.7,
        )
    )
    add("")

    typed = r.get("output", {}).get("rows")
    if typed:
        add("## 7b. Typed output with partial values (issue 32)\n")
        add(
            "A 1 MB JSON object in 10,000 chunks through `ChatClient.chat`, as plain text and "
            "with `output=` its struct type (the value read as it streams, a "
            "`PartialOutputEvent` per batch that changed it, validated at the end). CPU time "
            "of the client; the target is judged on the fake Ollama server, as an "
            "application streams.\n"
        )
        add("| source | backend | plain | with partial output | ratio |")
        add("|---|---|---:|---:|---:|")
        for row in typed:
            add(
                f"| {row['source']} | {row['backend']} | {row['plain_ms']:.0f} ms | "
                f"{row['typed_ms']:.0f} ms | {row['ratio']:.2f} |"
            )
        worst = max(row["ratio"] for row in typed if row["target"])
        summary.append(
            ("(issue 32) partial output within 2x plain text", f"{worst:.2f}x", "2x", worst <= 2.0)
        )
        add("")

    o = r.get("openai")
    if o is not None:
        rows = o["throughput"]
        sdk = rows["openai AsyncOpenAI"]["median"]
        ours = rows["ollm (ChatClient + OpenAIProvider)"]["median"]
        lite = rows["litellm acompletion (openai/)"]["median"]
        add("## 8. OpenAI-compatible servers (ollm-openai)\n")
        add(
            (f"Measured {o['date']} (`./ollmw bench --only openai`). " if "date" in o else "")
            + f"One reply of {o['chunks']:,} `chat.completion.chunk` events, framed as vLLM frames "
            "them (one SSE event per HTTP chunk, a usage chunk, `data: [DONE]`), from a body "
            "encoded in advance; `ollm` counts the `TextEvent`s of `ChatClient.chat` with "
            "`OpenAIProvider`, through the whole runtime.\n"
        )
        _streaming_tables(add, o, sdk, "openai AsyncOpenAI")
        summary.append(
            ("(issue 14) >= 5x openai AsyncOpenAI", f"{ours / sdk:.1f}x", "5x", ours >= 5 * sdk)
        )
        summary.append(("(issue 14) ahead of litellm", f"{ours / lite:.1f}x", "> 1x", ours > lite))

    g = r.get("gemini")
    if g is not None:
        rows = g["throughput"]
        sdk = rows["google-genai (client.aio)"]["median"]
        ours = rows["ollm (ChatClient + GeminiProvider)"]["median"]
        add("## 9. Gemini (ollm-gemini)\n")
        add(
            (f"Measured {g['date']} (`./ollmw bench --only gemini`). " if "date" in g else "")
            + f"One reply of {g['chunks']:,} `GenerateContentResponse` events, framed as the "
            "Gemini API frames them (`streamGenerateContent?alt=sse`, `\\r\\n` line ends, "
            "`usageMetadata` in each), from a body encoded in advance; `ollm` counts the "
            "`TextEvent`s of `ChatClient.chat` with `GeminiProvider`, through the whole runtime.\n"
        )
        _streaming_tables(add, g, sdk, "google-genai")
        summary.append(
            ("(issue 15) ahead of google-genai", f"{ours / sdk:.1f}x", "> 1x", ours > sdk)
        )

    a = r.get("anthropic")
    if a is not None:
        rows = a["throughput"]
        sdk = rows["anthropic AsyncAnthropic (raw events)"]["median"]
        ours = rows["ollm (ChatClient + AnthropicProvider)"]["median"]
        add("## 9b. Anthropic's Messages API (ollm-anthropic)\n")
        add(
            (f"Measured {a['date']} (`./ollmw bench --only anthropic`). " if "date" in a else "")
            + f"One reply of {a['chunks']:,} `text_delta` events, as FakeAnthropicServer "
            "writes them (`event:` and `data:` lines, `message_start`, `ping`, the text block, "
            "`message_delta`, `message_stop`), served again from the bytes it wrote; `ollm` "
            "counts the `TextEvent`s of `ChatClient.chat` with `AnthropicProvider`, through "
            "the whole runtime; the SDK's rows count its raw `text_delta` events "
            "(`messages.create(stream=True)`) and its helper's text events "
            "(`messages.stream()`).\n"
        )
        _streaming_tables(add, a, sdk, "anthropic AsyncAnthropic")
        summary.append(
            (
                "(issue 46) >= 5x anthropic AsyncAnthropic",
                f"{ours / sdk:.1f}x",
                "5x",
                ours >= 5 * sdk,
            )
        )

    p = r.get("pool")
    if p is not None:
        add("## 10. A pool of three servers (ollm-pool)\n")
        add(
            (f"Measured {p['date']} (`./ollmw bench --only pool`). " if "date" in p else "")
            + f"{p['chats']:,} chats at once, each a reply of {p['chunks_per_chat']} chunks, "
            "through the whole runtime (`ChatClient.chat`, a conversation each): through one "
            "`OllamaProvider` on one fake server, and through a `PoolProvider` of three "
            "`OllamaProvider`s on three fake servers. CPU time of the client process per "
            "chunk; memory is its peak RSS, and what it grew by during the chats; what is "
            "left after them: tasks, requests in flight, sockets (idle connections kept for "
            "reuse, then none once the providers are closed).\n"
        )
        add("| | CPU per chunk (µs) | [min-max] | wall (s) | peak RSS (MiB) | growth (MiB) |")
        add("|---|---:|---|---:|---:|---:|")
        for label, key in (("one provider, one server", "single"), ("pool of three", "pool")):
            row = p[key]
            cpu = row["cpu_us_per_chunk"]
            add(
                f"| {label} | {cpu['median']:.2f} | {cpu['min']:.2f}-{cpu['max']:.2f} | "
                f"{row['wall_s']['median']:.2f} | {row['rss_peak_kb'] / 1024:.0f} | "
                f"{row['rss_growth_kb'] / 1024:.0f} |"
            )
        last = p["pool"]["last"]
        add("")
        add(
            f"Left after the pool's chats: {last.get('tasks_left')} tasks, "
            f"{last.get('in_flight_left')} requests in flight, {last.get('sockets_open_idle')} "
            f"idle connections (20 per member, kept for reuse), "
            f"{last.get('sockets_after_close')} sockets once closed; the chats went "
            f"{', '.join(str(n) for n in last.get('attempts_per_member', []))} to the members.\n"
        )
        leaks = (
            last.get("tasks_left") == 0
            and last.get("in_flight_left") == 0
            and last.get("sockets_after_close") == 0
        )
        summary.append(
            (
                "(issue 34) pool's CPU per chunk <= 1.2x one provider's",
                f"{p['ratio']:.2f}x",
                "1.2x",
                p["ratio"] <= 1.2,
            )
        )
        summary.append(("(issue 34) no task, request or connection left", "none", "none", leaks))

    head = ["## Targets\n", "| target | measured | bar | |", "|---|---|---|---|"]
    for name, figure, bar, ok in summary:
        head.append(f"| {name} | {figure} | {bar} | {_mark(ok)} |")
    head.append("")
    title, intro, versions = out[0], out[1], out[2]
    return "\n".join([title, intro, versions, *head, *out[3:]]) + "\n"


def _streaming_tables(add: Any, section: dict[str, Any], sdk: float, peer: str) -> None:
    """A streaming section's throughput table (as ratios to ``peer``) and import table."""
    add(f"| client | chunks/s (wall) | [min-max] | chunks/s (CPU) | vs {peer} |")
    add("|---|---:|---|---:|---:|")
    for label, row in section["throughput"].items():
        cpu = _k(row["cpu_median"]) if "cpu_median" in row else ""
        add(
            f"| {label} | {_k(row['median'])} | {_k(row['min'])}-{_k(row['max'])} | {cpu} "
            f"| {row['median'] / sdk:.2f}x |"
        )
    add("")
    add("| import | ms (median) | [min-max] |")
    add("|---|---:|---|")
    for label, row in section["imports"].items():
        add(f"| `{label}` | {row['median']:.0f} | {row['min']:.0f}-{row['max']:.0f} |")
    add("")
