"""A fake OpenAI-compatible server for tests: real HTTP on 127.0.0.1, the Chat Completions
wire format as OpenAI, vLLM, SGLang, llama.cpp, LM Studio, Ollama and LiteLLM send it,
faults on demand, and a record of every request.

::

    from ollm_testutils.fake_openai import FakeOpenAIServer, OpenAIReply

    with FakeOpenAIServer(flavor="vllm") as server:
        server.script(OpenAIReply(["Hello", " there"]), OpenAIReply(end="cut"))
        ...  # talk to server.base_url
"""

from ollm_testutils.fake_openai._script import (
    AUTO,
    FLAVORS,
    Flavor,
    OpenAIReply,
    OpenAIToolCall,
    RecordedRequest,
)
from ollm_testutils.fake_openai._server import FakeOpenAIServer, ReplyFunction

__all__ = [
    "AUTO",
    "FLAVORS",
    "FakeOpenAIServer",
    "Flavor",
    "OpenAIReply",
    "OpenAIToolCall",
    "RecordedRequest",
    "ReplyFunction",
]
