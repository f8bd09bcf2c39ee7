"""The fake Ollama, OpenAI-compatible, Gemini and Anthropic servers as the typed-output
tests use them: scripted text replies and tool calls, and what each request carried (the
native constraint, the system prompt, the messages) read out of each wire format.

Anthropic's constraint is a forced tool (``ollm_output``): a scripted text that is JSON
answers a request that offers that tool as the tool's input, in the same pieces (as a
model answers it), and as text otherwise."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from typing import Any

import msgspec

import ollm
from ollm_anthropic import AnthropicProvider
from ollm_gemini import GeminiProvider
from ollm_ollama import OllamaProvider
from ollm_openai import OpenAIProvider
from ollm_testutils import (
    AnthropicReply,
    AnthropicToolUse,
    FakeAnthropicServer,
    FakeGeminiServer,
    FakeOllamaServer,
    FakeOpenAIServer,
    GeminiReply,
    OllamaReply,
    OpenAIReply,
)

KEY = "test-key"
PROVIDERS = ("ollama", "openai", "gemini", "anthropic")
OUTPUT_TOOL = "ollm_output"


class P(msgspec.Struct):
    """The output type most typed-output tests ask for."""

    name: str
    age: int


class Fake:
    """One fake server, how to script it, and what its requests carried."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.server: Any = {
            "ollama": FakeOllamaServer,
            "openai": FakeOpenAIServer,
            "gemini": FakeGeminiServer,
            "anthropic": FakeAnthropicServer,
        }[name]()
        # Anthropic's replies are chosen when the request comes (see the module's doc).
        self.queue: deque[Any] = deque()
        if name == "anthropic":
            self.server.reply_with(self._anthropic_reply)

    def __enter__(self) -> Fake:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)

    def text(self, text: str | Sequence[str]) -> Any:
        """A reply of ``text`` (one piece per item)."""
        if self.name == "ollama":
            return OllamaReply(text)
        if self.name == "openai":
            return OpenAIReply(text)
        if self.name == "anthropic":
            return ("text", [text] if isinstance(text, str) else list(text))
        return GeminiReply(text)

    def call(self, name: str, args: dict[str, Any]) -> Any:
        """A reply that calls one tool."""
        if self.name == "ollama":
            return OllamaReply(tool_calls=[(name, args)])
        if self.name == "openai":
            return OpenAIReply(tool_calls=[(name, args)])
        if self.name == "anthropic":
            return AnthropicReply(tool_uses=[(name, args)])
        return GeminiReply(calls=[(name, args)])

    def script(self, *replies: Any) -> None:
        if self.name == "anthropic":
            self.queue.extend(replies)
        else:
            self.server.script(*replies)

    def _anthropic_reply(self, body: dict[str, Any]) -> Any:
        if not self.queue:
            return None
        reply = self.queue.popleft()
        if not isinstance(reply, tuple):
            return reply
        pieces: list[str] = reply[1]
        tools = {t.get("name"): t for t in body.get("tools") or []}
        try:
            value = json.loads("".join(pieces))
        except ValueError:
            value = None
        output = tools.get(OUTPUT_TOOL)
        if output is None or value is None:
            return AnthropicReply(pieces)
        if "value" in output["input_schema"].get("properties", {}) and not isinstance(value, dict):
            pieces = ['{"value": ', *pieces, "}"]
        elif not isinstance(value, dict):
            return AnthropicReply(pieces)
        return AnthropicReply(tool_uses=[AnthropicToolUse(OUTPUT_TOOL, raw=pieces)])

    @property
    def model(self) -> str:
        return {
            "ollama": "llama3.2",
            "openai": "gpt-test",
            "gemini": "gemini-2.5-flash",
            "anthropic": "claude-sonnet-4-6",
        }[self.name]

    def provider(self) -> ollm.ProviderAdapter:
        if self.name == "ollama":
            return OllamaProvider(self.server.url, environ={})
        if self.name == "openai":
            return OpenAIProvider(self.server.base_url, model=self.model, environ={})
        if self.name == "anthropic":
            return AnthropicProvider(KEY, base_url=self.server.url, environ={})
        return GeminiProvider(KEY, base_url=self.server.url, environ={})

    def client(self, **settings: Any) -> ollm.ChatClient:
        """A client of this server alone (no plugins but those given)."""
        registries = settings.pop("registries", None) or ollm.Registries()
        return ollm.ChatClient(registries, provider=self.provider(), model=self.model, **settings)

    def env(self) -> dict[str, str]:
        """The environment that points ``ollm`` at this server."""
        if self.name == "ollama":
            return {"OLLAMA_HOST": self.server.url}
        if self.name == "openai":
            return {"OPENAI_BASE_URL": self.server.base_url}
        if self.name == "anthropic":
            return {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": self.server.url}
        return {"GEMINI_API_KEY": KEY, "OLLM_GEMINI_BASE_URL": self.server.url}

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The chat requests' bodies, in order."""
        if self.name == "gemini":
            requests = self.server.generate_requests
        elif self.name == "anthropic":
            requests = self.server.message_requests
        else:
            requests = self.server.chat_requests
        return [r.json for r in requests]

    def constraint(self, body: dict[str, Any]) -> Any:
        """The native output constraint a request carried (``None``: none)."""
        if self.name == "ollama":
            return body.get("format")
        if self.name == "openai":
            return body.get("response_format")
        if self.name == "anthropic":
            tools = [t for t in body.get("tools") or [] if t["name"] == OUTPUT_TOOL]
            return tools[0]["input_schema"] if tools else None
        config = body.get("generationConfig", {})
        return config.get("responseSchema") or config.get("responseJsonSchema")

    def system(self, body: dict[str, Any]) -> str:
        """The system prompt a request carried."""
        if self.name == "gemini":
            parts = body.get("systemInstruction", {}).get("parts", [])
            return "".join(p.get("text", "") for p in parts)
        if self.name == "anthropic":
            return str(body.get("system") or "")
        return "".join(m["content"] for m in body["messages"] if m["role"] == "system")

    def last_user_text(self, body: dict[str, Any]) -> str:
        """The text of the request's last user message."""
        if self.name == "gemini":
            users = [c for c in body["contents"] if c["role"] == "user"]
            return "".join(p.get("text", "") for p in users[-1]["parts"])
        users = [m for m in body["messages"] if m["role"] == "user"]
        if self.name == "anthropic":
            return "".join(b.get("text", "") for b in users[-1]["content"])
        return str(users[-1]["content"])
