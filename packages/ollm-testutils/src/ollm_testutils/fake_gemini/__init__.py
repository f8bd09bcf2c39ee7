"""A fake Gemini API for tests: real HTTP on 127.0.0.1, the REST wire format of
``generateContent`` (SSE with ``alt=sse``), function calls with thought signatures,
thoughts, safety blocks, Google's error bodies, paginated models, ``countTokens``,
``batchEmbedContents``, and a record of every request.

::

    from ollm_testutils.fake_gemini import FakeGeminiServer, GeminiReply

    with FakeGeminiServer() as server:
        server.script(GeminiReply(["Hello", " there"]), GeminiReply(end="cut"))
        ...  # GeminiProvider("test-key", base_url=server.url)
"""

from ollm_testutils.fake_gemini._script import GeminiCall, GeminiReply, google_error
from ollm_testutils.fake_gemini._server import FakeGeminiServer, GeminiReplyFunction

__all__ = [
    "FakeGeminiServer",
    "GeminiCall",
    "GeminiReply",
    "GeminiReplyFunction",
    "google_error",
]
