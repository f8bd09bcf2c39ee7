"""A fake Ollama server for tests: real HTTP on 127.0.0.1, Ollama's wire format, faults
on demand, and a record of every request.

::

    from ollm_testutils.fake_ollama import FakeOllamaServer, OllamaReply

    with FakeOllamaServer() as server:
        server.script(OllamaReply(["Hello", " there"]), OllamaReply.midstream_error())
        ...  # talk to server.url
"""

from ollm_testutils.fake_ollama._script import (
    AUTO,
    OllamaModel,
    OllamaReply,
    OllamaToolCall,
    RecordedRequest,
    StreamEnd,
    ToolCallPlacement,
)
from ollm_testutils.fake_ollama._server import DEFAULT_VERSION, FakeOllamaServer, ReplyFunction

__all__ = [
    "AUTO",
    "DEFAULT_VERSION",
    "FakeOllamaServer",
    "OllamaModel",
    "OllamaReply",
    "OllamaToolCall",
    "RecordedRequest",
    "ReplyFunction",
    "StreamEnd",
    "ToolCallPlacement",
]
