"""Test ollm applications and plugins: mock providers, fake Ollama, OpenAI-compatible,
Gemini and Anthropic servers, cassettes of real traffic, pytest fixtures.

Names load on first use, so ``import ollm_testutils`` stays cheap: the fake server and
its HTTP machinery are imported only when a test asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.kit import lazy_exports
from ollm_testutils._version import __version__

if TYPE_CHECKING:
    from ollm_testutils.capabilities import MockEmbeddings, MockModels
    from ollm_testutils.cassette import Cassette, CassetteMiss
    from ollm_testutils.echo import EchoProvider
    from ollm_testutils.events import EventCollector
    from ollm_testutils.fake_anthropic import (
        AnthropicReply,
        AnthropicThinking,
        AnthropicToolUse,
        FakeAnthropicServer,
    )
    from ollm_testutils.fake_gemini import FakeGeminiServer, GeminiCall, GeminiReply
    from ollm_testutils.fake_ollama import (
        AUTO,
        FakeOllamaServer,
        OllamaModel,
        OllamaReply,
        OllamaToolCall,
        RecordedRequest,
    )
    from ollm_testutils.fake_openai import FakeOpenAIServer, OpenAIReply, OpenAIToolCall
    from ollm_testutils.mock import FunctionProvider, MockProvider, Reply, ScriptedProvider

_LAZY: dict[str, str] = {
    "AUTO": "ollm_testutils.fake_ollama",
    "AnthropicReply": "ollm_testutils.fake_anthropic",
    "AnthropicThinking": "ollm_testutils.fake_anthropic",
    "AnthropicToolUse": "ollm_testutils.fake_anthropic",
    "Cassette": "ollm_testutils.cassette",
    "CassetteMiss": "ollm_testutils.cassette",
    "EchoProvider": "ollm_testutils.echo",
    "EventCollector": "ollm_testutils.events",
    "FakeAnthropicServer": "ollm_testutils.fake_anthropic",
    "FakeGeminiServer": "ollm_testutils.fake_gemini",
    "FakeOllamaServer": "ollm_testutils.fake_ollama",
    "FakeOpenAIServer": "ollm_testutils.fake_openai",
    "FunctionProvider": "ollm_testutils.mock",
    "GeminiCall": "ollm_testutils.fake_gemini",
    "GeminiReply": "ollm_testutils.fake_gemini",
    "MockEmbeddings": "ollm_testutils.capabilities",
    "MockModels": "ollm_testutils.capabilities",
    "MockProvider": "ollm_testutils.mock",
    "OllamaModel": "ollm_testutils.fake_ollama",
    "OllamaReply": "ollm_testutils.fake_ollama",
    "OllamaToolCall": "ollm_testutils.fake_ollama",
    "OpenAIReply": "ollm_testutils.fake_openai",
    "OpenAIToolCall": "ollm_testutils.fake_openai",
    "RecordedRequest": "ollm_testutils.fake_ollama",
    "Reply": "ollm_testutils.mock",
    "ScriptedProvider": "ollm_testutils.mock",
}

__all__ = [
    "AUTO",
    "AnthropicReply",
    "AnthropicThinking",
    "AnthropicToolUse",
    "Cassette",
    "CassetteMiss",
    "EchoProvider",
    "EventCollector",
    "FakeAnthropicServer",
    "FakeGeminiServer",
    "FakeOllamaServer",
    "FakeOpenAIServer",
    "FunctionProvider",
    "GeminiCall",
    "GeminiReply",
    "MockEmbeddings",
    "MockModels",
    "MockProvider",
    "OllamaModel",
    "OllamaReply",
    "OllamaToolCall",
    "OpenAIReply",
    "OpenAIToolCall",
    "RecordedRequest",
    "Reply",
    "ScriptedProvider",
    "__version__",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
