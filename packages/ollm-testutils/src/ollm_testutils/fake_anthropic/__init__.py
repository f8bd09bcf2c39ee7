"""A fake Anthropic Messages API for tests: real HTTP on 127.0.0.1, the streamed events
of ``POST /v1/messages`` (text, thinking with signatures, parallel ``tool_use``,
``ping``, ``error`` mid-stream), the API's error bodies, paginated models,
``count_tokens``, and a record of every request. The official ``anthropic`` SDK streams
and parses its replies.

::

    from ollm_testutils.fake_anthropic import AnthropicReply, FakeAnthropicServer

    with FakeAnthropicServer() as server:
        server.script(AnthropicReply(["Hello", " there"]), AnthropicReply(end="cut"))
        ...  # AnthropicProvider("test-key", base_url=server.url)
"""

from ollm_testutils.fake_anthropic._script import (
    AnthropicReply,
    AnthropicThinking,
    AnthropicToolUse,
    anthropic_error,
)
from ollm_testutils.fake_anthropic._server import AnthropicReplyFunction, FakeAnthropicServer

__all__ = [
    "AnthropicReply",
    "AnthropicReplyFunction",
    "AnthropicThinking",
    "AnthropicToolUse",
    "FakeAnthropicServer",
    "anthropic_error",
]
