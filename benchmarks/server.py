"""The benchmark server: a FakeOllamaServer in its own process, replies built in advance.

    python benchmarks/server.py          prints its URL, then serves until stdin closes

Models ``bench-<N>`` answer every chat with N text chunks (``"000 "``, ``"001 "``...: no two
in a row alike, for litellm refuses a stream that repeats itself), framed one NDJSON
line per HTTP chunk as a real Ollama frames them, but encoded once and written in large
writes, so that the server is never what is measured (``child.py socket`` shows its own
rate with a client that does nothing but read).
"""

from __future__ import annotations

import sys
from typing import Any

from ollm_testutils import FakeOllamaServer, OllamaReply

SIZES = (1, 2, 2_000, 20_000, 40_000, 100_000, 200_000)


def main() -> None:
    replies = {
        f"bench-{n}": OllamaReply([f"{i % 1000:03d} " for i in range(n)], bulk=True) for n in SIZES
    }

    def reply(body: dict[str, Any]) -> OllamaReply | None:
        return replies.get(str(body.get("model", "")).removesuffix(":latest"))

    with FakeOllamaServer(models=False) as server:
        for n in SIZES:
            server.add_model(f"bench-{n}", ["completion", "tools"], context_length=1 << 30)
        server.reply_with(reply)
        print(server.url, flush=True)
        sys.stdin.read()  # serve until the parent closes our stdin


if __name__ == "__main__":
    main()
