"""The official client as a whole program: stream one chat and print it (run.py times it).

python ollama_process.py URL MODEL
"""

from __future__ import annotations

import asyncio
import sys

import ollama


async def main(url: str, model: str) -> None:
    client = ollama.AsyncClient(host=url)
    write = sys.stdout.write
    async for part in await client.chat(
        model=model, messages=[{"role": "user", "content": "go"}], stream=True
    ):
        write(part.message.content or "")
    write("\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
