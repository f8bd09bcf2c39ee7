"""What a test tells the fake Ollama server: replies, tool calls, models; what it records."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

import msgspec

from ollm_testutils.fake_ollama._wire import go_json

__all__ = [
    "AUTO",
    "OllamaModel",
    "OllamaReply",
    "OllamaToolCall",
    "RecordedRequest",
    "StreamEnd",
    "ToolCallPlacement",
]


class _Auto:
    """The server picks the value the way a real one would."""

    _instance: _Auto | None = None

    def __new__(cls) -> _Auto:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "AUTO"


AUTO: Final = _Auto()
"""Let the server choose (a fresh ``call_xxxxxxxx`` id, the call's position as index)."""

ToolCallPlacement = Literal["chunk", "each", "final"]
"""Where tool calls go: one ``done:false`` chunk, one chunk per call, or the final chunk."""

StreamEnd = Literal["done", "close", "eof"]
"""How a stream ends: the ``done:true`` line; the connection closed in the middle of the
body; or a body that ends cleanly without any ``done:true`` line."""


class OllamaToolCall:
    """One tool call in a reply, as the server sends it.

    ``arguments`` is a JSON object (a mapping); a ``str`` is sent as a JSON string, as
    some servers did (ollama/ollama-python#484). ``id`` is ``AUTO`` (a random
    ``call_xxxxxxxx`` like a current server), a fixed string, or ``None`` (no id, as
    before v0.12.10). ``index`` is ``AUTO`` (the position in the turn), a number, or
    ``None`` (left out, as before v0.12.6).
    """

    __slots__ = ("arguments", "id", "index", "name")

    def __init__(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        id: str | _Auto | None = AUTO,
        index: int | _Auto | None = AUTO,
    ) -> None:
        self.name = name
        self.arguments: Mapping[str, Any] | str = {} if arguments is None else arguments
        self.id = id
        self.index = index

    def __repr__(self) -> str:
        return f"OllamaToolCall({self.name!r}, {self.arguments!r}, id={self.id!r})"


ToolCallSpec = OllamaToolCall | tuple[str, Mapping[str, Any]]


class OllamaReply:
    """One scripted answer to ``POST /api/chat``.

    A streamed reply is written as NDJSON lines, each its own HTTP chunk, in this order:
    a huge content chunk (``huge_chunk`` characters, when set), the ``thinking`` chunks,
    the ``text`` chunks, the tool calls (``tool_calls_on``: ``"chunk"`` puts them all on
    one ``done:false`` chunk, ``"each"`` one call per chunk, ``"final"`` on the
    ``done:true`` chunk), then the end. A ``malformed`` line is inserted before line
    number ``malformed_at``. The end is, in this order of precedence: ``hang`` (nothing
    more until the client goes away), ``error_line`` (an ``{"error": ...}`` line, as a
    real server writes when generation fails once output has started), ``end="close"``
    (the connection is closed mid-body), ``end="eof"`` (the body ends without a
    ``done:true`` line), or the ``done:true`` line with ``final_text``, ``done_reason``
    and ``metrics`` (``None``: plausible metrics; ``{}``: none).

    ``status`` other than 200 answers with that status and ``body`` before anything is
    streamed (see ``http_error``). ``first_byte_delay`` waits before the response
    starts, ``chunk_delay`` between lines. ``write_size`` cuts the body into HTTP chunks
    of that many bytes, wherever the line and character boundaries fall. ``bulk``
    encodes the text chunks and the final chunk once, framed one line per HTTP chunk as
    Ollama frames them, and writes them in large pieces (for benchmarks; the other
    fields are ignored then). ``lines`` replaces the whole
    streamed body with these lines, written as given.

    A request with ``"stream": false`` gets one JSON object that joins the content,
    thinking and tool calls, as a real server does; the faults become a ``500`` (an
    error line or a body without ``done``), a closed connection (``end="close"``) or a
    hang.
    """

    __slots__ = (
        "_bulk_cache",
        "body",
        "bulk",
        "chunk_delay",
        "done_reason",
        "end",
        "error_line",
        "final_text",
        "first_byte_delay",
        "hang",
        "huge_chunk",
        "lines",
        "malformed",
        "malformed_at",
        "metrics",
        "status",
        "text",
        "thinking",
        "tool_calls",
        "tool_calls_on",
        "write_size",
    )

    def __init__(
        self,
        text: str | Sequence[str] = (),
        *,
        thinking: str | Sequence[str] = (),
        tool_calls: Sequence[ToolCallSpec] = (),
        tool_calls_on: ToolCallPlacement = "chunk",
        final_text: str = "",
        done_reason: str | None = "stop",
        metrics: Mapping[str, int] | None = None,
        status: int = 200,
        body: bytes | str | Mapping[str, Any] | None = None,
        error_line: str | None = None,
        end: StreamEnd = "done",
        hang: bool = False,
        malformed: str | bytes | None = None,
        malformed_at: int = 0,
        huge_chunk: int = 0,
        first_byte_delay: float = 0.0,
        chunk_delay: float = 0.0,
        write_size: int | None = None,
        bulk: bool = False,
        lines: Sequence[bytes | str] | None = None,
    ) -> None:
        if tool_calls_on not in ("chunk", "each", "final"):
            raise ValueError(f"tool_calls_on must be chunk, each or final, not {tool_calls_on!r}")
        if end not in ("done", "close", "eof"):
            raise ValueError(f"end must be done, close or eof, not {end!r}")
        if write_size is not None and write_size < 1:
            raise ValueError("write_size must be a positive number of bytes")
        self.text = [text] if isinstance(text, str) else list(text)
        self.thinking = [thinking] if isinstance(thinking, str) else list(thinking)
        self.tool_calls = [_tool_call(spec) for spec in tool_calls]
        self.tool_calls_on = tool_calls_on
        self.final_text = final_text
        self.done_reason = done_reason
        self.metrics = None if metrics is None else dict(metrics)
        self.status = status
        if isinstance(body, Mapping):
            body = go_json(body)
        self.body = body.encode() if isinstance(body, str) else body
        self.error_line = error_line
        self.end = end
        self.hang = hang
        self.malformed = malformed.encode() if isinstance(malformed, str) else malformed
        self.malformed_at = malformed_at
        self.huge_chunk = huge_chunk
        self.first_byte_delay = first_byte_delay
        self.chunk_delay = chunk_delay
        self.write_size = write_size
        self.bulk = bulk
        self.lines = None if lines is None else [_line(item) for item in lines]
        self._bulk_cache: dict[str, bytes] = {}

    # -- ready-made faults ----------------------------------------------------------

    @classmethod
    def http_error(cls, status: int, message: str | None) -> OllamaReply:
        """``status`` with ``{"error": message}`` (or an empty body for ``None``)."""
        body = None if message is None else go_json({"error": message})
        return cls(status=status, body=body)

    @classmethod
    def forbidden(cls) -> OllamaReply:
        """``403`` with an empty body, as the host guard answers a non-local Host."""
        return cls(status=403)

    @classmethod
    def server_busy(cls) -> OllamaReply:
        """``503``: the queue is full."""
        return cls.http_error(
            503, "server busy, please try again.  maximum pending requests exceeded"
        )

    @classmethod
    def internal_error(
        cls, message: str = "an error was encountered while running the model"
    ) -> OllamaReply:
        """``500`` before anything was streamed."""
        return cls.http_error(500, message)

    @classmethod
    def midstream_error(
        cls,
        text: str | Sequence[str] = ("The",),
        message: str = "an error was encountered while running the model",
    ) -> OllamaReply:
        """Some text, then an ``{"error": ...}`` line on the 200 stream."""
        return cls(text, error_line=message)

    @classmethod
    def disconnect(cls, text: str | Sequence[str] = ("The",)) -> OllamaReply:
        """Some text, then the connection closes before ``done``."""
        return cls(text, end="close")

    @classmethod
    def hanging(cls, text: str | Sequence[str] = ()) -> OllamaReply:
        """Some text, then nothing until the client closes the connection."""
        return cls(text, hang=True)

    @classmethod
    def streamed(cls, chunks: int, piece: str = "tok ") -> OllamaReply:
        """``chunks`` text chunks, pre-encoded and written in large writes (benchmarks)."""
        return cls([piece] * chunks, bulk=True)

    def __repr__(self) -> str:
        return (
            f"OllamaReply(text={self.text!r}, thinking={self.thinking!r}, "
            f"tool_calls={self.tool_calls!r}, status={self.status})"
        )


def _tool_call(spec: ToolCallSpec) -> OllamaToolCall:
    if isinstance(spec, OllamaToolCall):
        return spec
    name, arguments = spec
    return OllamaToolCall(name, arguments)


def _line(item: bytes | str) -> bytes:
    data = item.encode() if isinstance(item, str) else item
    return data if data.endswith(b"\n") else data + b"\n"


@dataclass
class OllamaModel:
    """A model the fake server has (``local``) or can pull (not ``local``).

    ``pullable`` says whether the registry has it, as for every model added by hand: it
    can be pulled again after ``rm``. A copy (``/api/copy``) exists only where it was made.
    ``capabilities`` are the strings of ``/api/show`` (``completion``, ``tools``,
    ``vision``, ``thinking``, ``embedding``, ``insert``); ``None`` plays an older
    server that does not report them. ``parameters`` become the Modelfile parameters of
    ``/api/show`` (``{"num_ctx": 8192, "stop": ["<|eot_id|>"]}``).
    """

    name: str
    capabilities: list[str] | None = field(default_factory=lambda: ["completion", "tools"])
    context_length: int = 131072
    embedding_length: int = 3072
    parameters: dict[str, Any] = field(default_factory=dict)
    family: str = "llama"
    size: int = 2019393189
    parameter_size: str = "3.2B"
    quantization: str = "Q4_K_M"
    format: str = "gguf"
    digest: str = ""
    modified_at: datetime | None = None
    template: str = "{{ .Prompt }}"
    system: str = ""
    license: str = ""
    local: bool = True
    pullable: bool = True


class RecordedRequest:
    """A request the server received, and how its response went.

    ``headers`` has lower-case names. ``json`` is the parsed body (``None`` when it was
    not JSON). ``status`` is the status the server answered with. ``completed`` turns
    true once the whole response was written; ``disconnected`` once the client went
    away before that. Both are set by the server's thread: call ``wait()`` (or
    ``await wait_async()``) before reading them.
    """

    __slots__ = (
        "_finished",
        "body",
        "completed",
        "disconnected",
        "headers",
        "json",
        "method",
        "path",
        "query",
        "status",
    )

    def __init__(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes
    ) -> None:
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.json: Any = None
        if body:
            try:
                self.json = msgspec.json.decode(body)
            except msgspec.DecodeError:
                self.json = None
        self.status: int | None = None
        self.completed = False
        self.disconnected = False
        self._finished = threading.Event()

    @property
    def finished(self) -> bool:
        """The server is done with this request (completed, failed or abandoned)."""
        return self._finished.is_set()

    def wait(self, timeout: float = 5.0) -> bool:
        """Block until the server is done with the request; False on timeout."""
        return self._finished.wait(timeout)

    async def wait_async(self, timeout: float = 5.0) -> bool:
        """``wait`` without blocking the event loop (asyncio and trio)."""
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self._finished.wait, timeout)

    def _finish(self, *, completed: bool, disconnected: bool) -> None:
        self.completed = completed
        self.disconnected = disconnected
        self._finished.set()

    def __repr__(self) -> str:
        state = "completed" if self.completed else "disconnected" if self.disconnected else "open"
        return f"<RecordedRequest {self.method} {self.path} {self.status} {state}>"
