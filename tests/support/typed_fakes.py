"""The fake Ollama, OpenAI-compatible and Gemini servers as the typed-output tests use
them: scripted text replies and tool calls, and what each request carried (the native
constraint, the system prompt, the messages) read out of each wire format."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ollm
from ollm_gemini import GeminiProvider
from ollm_ollama import OllamaProvider
from ollm_openai import OpenAIProvider
from ollm_testutils import (
    FakeGeminiServer,
    FakeOllamaServer,
    FakeOpenAIServer,
    GeminiReply,
    OllamaReply,
    OpenAIReply,
)

KEY = "test-key"
PROVIDERS = ("ollama", "openai", "gemini")


class Fake:
    """One fake server, how to script it, and what its requests carried."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.server: Any = {
            "ollama": FakeOllamaServer,
            "openai": FakeOpenAIServer,
            "gemini": FakeGeminiServer,
        }[name]()

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
        return GeminiReply(text)

    def call(self, name: str, args: dict[str, Any]) -> Any:
        """A reply that calls one tool."""
        if self.name == "ollama":
            return OllamaReply(tool_calls=[(name, args)])
        if self.name == "openai":
            return OpenAIReply(tool_calls=[(name, args)])
        return GeminiReply(calls=[(name, args)])

    def script(self, *replies: Any) -> None:
        self.server.script(*replies)

    @property
    def model(self) -> str:
        return {"ollama": "llama3.2", "openai": "gpt-test", "gemini": "gemini-2.5-flash"}[self.name]

    def provider(self) -> ollm.ProviderAdapter:
        if self.name == "ollama":
            return OllamaProvider(self.server.url, environ={})
        if self.name == "openai":
            return OpenAIProvider(self.server.base_url, model=self.model, environ={})
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
        return {"GEMINI_API_KEY": KEY, "OLLM_GEMINI_BASE_URL": self.server.url}

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The chat requests' bodies, in order."""
        if self.name == "gemini":
            requests = self.server.generate_requests
        else:
            requests = self.server.chat_requests
        return [r.json for r in requests]

    def constraint(self, body: dict[str, Any]) -> Any:
        """The native output constraint a request carried (``None``: none)."""
        if self.name == "ollama":
            return body.get("format")
        if self.name == "openai":
            return body.get("response_format")
        config = body.get("generationConfig", {})
        return config.get("responseSchema") or config.get("responseJsonSchema")

    def system(self, body: dict[str, Any]) -> str:
        """The system prompt a request carried."""
        if self.name == "gemini":
            parts = body.get("systemInstruction", {}).get("parts", [])
            return "".join(p.get("text", "") for p in parts)
        return "".join(m["content"] for m in body["messages"] if m["role"] == "system")

    def last_user_text(self, body: dict[str, Any]) -> str:
        """The text of the request's last user message."""
        if self.name == "gemini":
            users = [c for c in body["contents"] if c["role"] == "user"]
            return "".join(p.get("text", "") for p in users[-1]["parts"])
        users = [m for m in body["messages"] if m["role"] == "user"]
        return str(users[-1]["content"])
