"""``redact`` as a streaming matcher (issue 40) against the ``redact`` it replaced.

Two measurements, each on prose (spaces every few characters) and on minified JSON (no
whitespace at all), with a few keys in it:

- the matching alone: ``on_event`` called for every piece of a 1 MB reply, in pieces of
  4, 16 and 64 characters: CPU per piece;
- a whole chat: ``ChatClient`` over an in-memory provider streaming 20,000 pieces, with
  ``middleware=[Redact()]``, against no middleware.

Run: ``.venv/bin/python benchmarks/bench_redact.py`` (not yet part of ``./ollmw bench``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from legacy_redact import LegacyRedact

import ollm
from ollm.middleware import Redact
from ollm_testutils import Reply, ScriptedProvider

KEY = "sk-proj-" + "Q7wE9rT1yU3iO5pA2sD4fG6h"
SIZE = 1_000_000


def prose() -> str:
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "the",
        "lazy",
        "dog",
        "and",
        "then",
        "some",
        "more",
        "words",
    ]
    text, n = [], 0
    while n < SIZE:
        word = KEY if n % 50_000 < 10 else words[n % len(words)]
        text.append(word)
        n += len(word) + 1
    return " ".join(text)[:SIZE]


def minified() -> str:
    items, n = [], 0
    while n < SIZE:
        item = f'{{"id":{n},"name":"item{n}","token":"{KEY if n % 50_000 < 40 else "none"}"}}'
        items.append(item)
        n += len(item) + 1
    return ("[" + ",".join(items) + "]")[:SIZE]


class Ctx:
    """What ``on_event`` reads of the context: its state."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}


def per_piece(text: str, size: int) -> tuple[float, float]:
    """Microseconds of CPU per piece: the new matcher, the legacy one."""
    pieces = [ollm.TextEvent(text[i : i + size]) for i in range(0, len(text), size)]
    end = ollm.FinishEvent("stop")
    new, old = Redact(), LegacyRedact()

    async def run_new() -> None:
        ctx = Ctx()
        for piece in pieces:
            await new.on_event(ctx, piece)  # type: ignore[arg-type]
        await new.on_event(ctx, end)  # type: ignore[arg-type]

    def run_old() -> None:
        ctx = Ctx()
        for piece in pieces:
            old.on_event(ctx, piece)  # type: ignore[arg-type]
        old.on_event(ctx, end)  # type: ignore[arg-type]

    start = time.process_time()
    asyncio.run(run_new())
    new_us = (time.process_time() - start) / len(pieces) * 1e6
    start = time.process_time()
    run_old()
    old_us = (time.process_time() - start) / len(pieces) * 1e6
    return new_us, old_us


async def chat_seconds(text: str, middleware: list[object]) -> float:
    pieces = [text[i : i + 50] for i in range(0, 50 * 20_000, 50)]
    client = ollm.ChatClient(
        ollm.Registries(), provider=ScriptedProvider(Reply(pieces)), middleware=middleware
    )
    start = time.process_time()
    async with client:
        result = await client.run("go")
    assert result.ok
    return time.process_time() - start


def main() -> None:
    for name, text in (("prose", prose()), ("minified JSON", minified())):
        for size in (4, 16, 64):
            new_us, old_us = per_piece(text, size)
            print(
                f"{name:13} pieces of {size:2}: new {new_us:6.2f} us/piece, "
                f"legacy {old_us:6.2f} us/piece, ratio {new_us / old_us:4.2f}"
            )
        bare = asyncio.run(chat_seconds(text, []))
        new = asyncio.run(chat_seconds(text, [Redact()]))
        old = asyncio.run(chat_seconds(text, [LegacyRedact()]))
        print(
            f"{name:13} chat of 20,000 pieces (CPU s): none {bare:.2f}, redact {new:.2f}, "
            f"legacy redact {old:.2f}"
        )


if __name__ == "__main__":
    main()
