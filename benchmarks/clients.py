"""The clients compared: ollm and its peers, each streaming one chat from the same server.

Every client counts the text chunks it delivers and calls ``on_first`` at the first one.
Clients are opened once and reused, as an application would (a warm connection pool).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

MESSAGES = [{"role": "user", "content": "go"}]
OnFirst = Callable[[], None] | None


class Client:
    """One way to stream a chat."""

    name = ""
    asyncio_only = False

    async def open(self, url: str) -> None:
        self.url = url

    async def stream(self, model: str, on_first: OnFirst = None) -> int:
        raise NotImplementedError

    async def close(self) -> None:
        return None


class Ollm(Client):
    """``ollm.ChatClient`` with ``OllamaProvider``: every text event, through the runtime."""

    name = "ollm"

    def __init__(self, http: str = "builtin") -> None:
        self.http = http
        if http != "builtin":
            self.name = f"ollm (http={http})"

    async def open(self, url: str) -> None:
        import ollm
        from ollm_ollama import OllamaProvider

        self.ollm = ollm
        transport = None
        if self.http == "legacy":
            from legacy_transport import PlainHTTPTransport

            transport = PlainHTTPTransport()
        http = "builtin" if self.http == "legacy" else self.http
        self.provider = OllamaProvider(url, http=http, transport=transport, environ={})
        self.client = ollm.ChatClient(ollm.Registries(), provider=self.provider)

    async def stream(self, model: str, on_first: OnFirst = None) -> int:
        ollm = self.ollm
        text = ollm.TextEvent
        count = 0
        stream = self.client.chat("go", model=model, conversation=ollm.Conversation())
        async for event in stream:
            if type(event) is text:
                if not count and on_first is not None:
                    on_first()
                count += 1
            elif type(event) is ollm.ErrorEvent:
                raise RuntimeError(event.message)
        return count

    async def close(self) -> None:
        await self.provider.aclose()


class _Chunk(msgspec.Struct):
    class Message(msgspec.Struct):
        content: str = ""

    message: Message | None = None
    done: bool = False


class RawHttpx(Client):
    """httpx's ``aiter_lines`` and msgspec: the floor a careful hand-written client reaches."""

    name = "raw httpx + msgspec"

    async def open(self, url: str) -> None:
        import httpx

        self.client = httpx.AsyncClient(base_url=url, timeout=None)
        self.decode = msgspec.json.Decoder(_Chunk).decode

    async def stream(self, model: str, on_first: OnFirst = None) -> int:
        count = 0
        body = {"model": model, "messages": MESSAGES, "stream": True}
        async with self.client.stream("POST", "/api/chat", json=body) as response:
            async for line in response.aiter_lines():
                chunk = self.decode(line)
                if chunk.message is not None and chunk.message.content:
                    if not count and on_first is not None:
                        on_first()
                    count += 1
        return count

    async def close(self) -> None:
        await self.client.aclose()


class OllamaAsync(Client):
    """The official ``ollama`` package's ``AsyncClient``."""

    name = "ollama AsyncClient"

    async def open(self, url: str) -> None:
        import ollama

        self.client = ollama.AsyncClient(host=url)

    async def stream(self, model: str, on_first: OnFirst = None) -> int:
        count = 0
        async for part in await self.client.chat(model=model, messages=MESSAGES, stream=True):
            if part.message.content:
                if not count and on_first is not None:
                    on_first()
                count += 1
        return count


class Litellm(Client):
    """litellm's ``acompletion`` with the ``ollama_chat/`` provider."""

    name = "litellm"
    asyncio_only = True

    async def open(self, url: str) -> None:
        import litellm

        litellm.suppress_debug_info = True
        self.litellm = litellm
        self.url = url

    async def stream(self, model: str, on_first: OnFirst = None) -> int:
        count = 0
        response = await self.litellm.acompletion(
            model=f"ollama_chat/{model}", messages=MESSAGES, stream=True, api_base=self.url
        )
        async for chunk in response:
            if chunk.choices and chunk.choices[0].delta.content:
                if not count and on_first is not None:
                    on_first()
                count += 1
        return count


class LangchainOllama(Client):
    """langchain-ollama's ``ChatOllama.astream``."""

    name = "langchain-ollama"

    async def open(self, url: str) -> None:
        from langchain_ollama import ChatOllama

        self.url = url
        self.models: dict[str, Any] = {}
        self.make = ChatOllama

    async def stream(self, model: str, on_first: OnFirst = None) -> int:
        chat = self.models.get(model)
        if chat is None:
            chat = self.models[model] = self.make(model=model, base_url=self.url)
        count = 0
        async for chunk in chat.astream("go"):
            if chunk.content:
                if not count and on_first is not None:
                    on_first()
                count += 1
        return count


ASYNC_CLIENTS: dict[str, Callable[[], Client]] = {
    "ollm": Ollm,
    "ollm-httpx": lambda: Ollm(http="httpx"),
    "ollm-legacy": lambda: Ollm(http="legacy"),
    "raw-httpx": RawHttpx,
    "ollama": OllamaAsync,
    "litellm": Litellm,
    "langchain": LangchainOllama,
}


def ollama_sync_stream(url: str, model: str) -> int:
    """The official ``ollama`` package's blocking ``Client`` (no event loop)."""
    import ollama

    client = ollama.Client(host=url)
    count = 0
    for part in client.chat(model=model, messages=MESSAGES, stream=True):
        if part.message.content:
            count += 1
    return count
