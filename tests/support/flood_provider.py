"""A provider plugin for the CLI's Ctrl-C tests: a stream that pours text in and ignores
the abort signal (a server that will not stop, a decompression bomb), installed with
``cli_helpers.installed_plugin``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio

import ollm
from ollm.hookspecs import hookimpl


class FloodProvider:
    name = "flood"
    default_model = "flood"
    handles_abort = True  # it says so, and then does not: the runtime must cope

    async def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        piece = "x" * 4096
        # 64 MiB, then silence, and still no end: a reader that keeps up (a terminal) would
        # otherwise have a reply of gigabytes by the second Ctrl-C, which no log keeps.
        for _ in range(256):
            for _ in range(64):  # whole bursts with no checkpoint in between
                yield ollm.TextEvent(piece)
            await anyio.sleep(0)
        await anyio.sleep_forever()


@hookimpl
def ollm_providers() -> list[ollm.ProviderSpec]:
    return [ollm.ProviderSpec(name="flood", factory=FloodProvider, description="a flood")]
