"""Long conversations: the cost per turn of token accounting and the compaction decision.

    python benchmarks/bench_context.py [--turns 1000]

A conversation grows turn by turn (a question, a tool call, its 2,000-token result, an
answer) with compaction on (``compact="auto"``). At every turn the runtime counts the
request (``Compaction.count``: the view's own count, else ``IncrementalCount``, the
fallback count message by message) and decides what
to send (``Compaction.apply``: the view, compacted past 0.8 of the window). The cost of a
turn then depends on the window (what is sent), never on the length of the history:

- the median CPU time of those two steps at turns 991-1000 is within 1.5x of turns
  491-500 (the history twice as long, the window as full), at 4,096 and 32,768 tokens;
- turns 11-20 are shown too: there the window is still filling (what is sent is smaller),
  so they cost less than a full window does.

The whole-history recount (``fallback_count``) is measured beside them, for comparison.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

import ollm
from ollm.registries.tokens import IncrementalCount, fallback_count
from ollm.runtime.compaction import Compaction, ContextView

RESULT = "r" * 8000  # 2,000 tokens


def _turn(number: int) -> list[ollm.Message]:
    call = ollm.ToolCall(f"call_{number}", "fetch", {"page": number})
    return [
        ollm.Message.user(f"Question {number}: what does page {number} say?"),
        ollm.Message.assistant("", tool_calls=[call]),
        ollm.Message.tool(RESULT, call=call),
        ollm.Message.assistant(f"Page {number} says many things. " * 8),
    ]


def measure(turns: int, window: int) -> dict[str, Any]:
    """CPU nanoseconds per turn of: the incremental count and the compaction decision
    together, and the whole-history count, at each turn."""
    compaction = Compaction(ContextView(), "auto", 0.8, IncrementalCount())
    history: list[ollm.Message] = []
    incremental: list[int] = []
    recount: list[int] = []
    compactions = 0
    # The collector's passes over the growing history are the benchmark's, not the step's.
    gc.disable()
    for number in range(1, turns + 1):
        history.extend(_turn(number))
        request = ollm.ProviderRequest("m", tuple(history), "Be brief.")
        started = time.process_time_ns()
        sent, event = compaction.apply(request, window)
        compaction.count(sent)  # as the runtime counts it
        incremental.append(time.process_time_ns() - started)
        compactions += event is not None
        started = time.process_time_ns()
        fallback_count(request)
        recount.append(time.process_time_ns() - started)
    gc.enable()
    first, early, late = slice(10, 20), slice(turns // 2 - 10, turns // 2), slice(turns - 10, turns)
    result = {
        "turns": turns,
        "window": window,
        "from": early.start + 1,
        "compactions": compactions,
        "incremental_ns_first": statistics.median(incremental[first]),
        "incremental_ns_early": statistics.median(incremental[early]),
        "incremental_ns_late": statistics.median(incremental[late]),
        "recount_ratio": statistics.median(recount[late]) / statistics.median(recount[10:20]),
    }
    result["incremental_ratio"] = result["incremental_ns_late"] / result["incremental_ns_early"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for window in (4096, 32768):
        runs = [measure(args.turns, window) for _ in range(args.repeats)]
        ratio = statistics.median(r["incremental_ratio"] for r in runs)
        start = statistics.median(r["incremental_ns_first"] for r in runs)
        early = statistics.median(r["incremental_ns_early"] for r in runs)
        late = statistics.median(r["incremental_ns_late"] for r in runs)
        recount = statistics.median(r["recount_ratio"] for r in runs)
        first = runs[0]["from"]
        print(
            f"window {window}: accounting + compaction decision {start / 1000:.1f} us a turn "
            f"at turns 11-20, {early / 1000:.1f} us at turns {first}-{first + 9}, "
            f"{late / 1000:.1f} us at turns "
            f"{args.turns - 9}-{args.turns} (x{ratio:.2f}, min-max "
            f"x{min(r['incremental_ratio'] for r in runs):.2f}-"
            f"x{max(r['incremental_ratio'] for r in runs):.2f}); "
            f"{runs[0]['compactions']} compactions; a whole-history recount grows "
            f"x{recount:.0f} from turn 20; target (within x1.5): "
            + ("met" if ratio <= 1.5 else "NOT met")
        )


if __name__ == "__main__":
    main()
