"""``FakeOllamaServer``: a real HTTP server on 127.0.0.1 that speaks Ollama's API."""

from __future__ import annotations

import inspect
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from ollm_testutils.fake_ollama._exchange import Exchange
from ollm_testutils.fake_ollama._routes import dispatch
from ollm_testutils.fake_ollama._script import OllamaModel, OllamaReply, RecordedRequest
from ollm_testutils.fake_ollama._store import ModelStore
from ollm_testutils.fake_ollama._wire import go_json
from ollm_testutils.httpserver._connection import Connection, HttpRequest, Response
from ollm_testutils.httpserver._fake import FakeServer

__all__ = ["DEFAULT_VERSION", "FakeOllamaServer", "ReplyFunction"]

DEFAULT_VERSION = "0.33.0-rc2"

ReplyFunction = Callable[[dict[str, Any]], "OllamaReply | str | None"]
"""Computes the reply to a chat request from its JSON body; ``None`` for the default."""


class _Failure:
    __slots__ = ("body", "headers", "path", "remaining", "status")

    def __init__(
        self,
        status: int,
        body: bytes,
        path: str | None,
        times: int | None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.status = status
        self.body = body
        self.path = path
        self.remaining = times
        self.headers = headers


class FakeOllamaServer(FakeServer):
    """A fake Ollama on 127.0.0.1 at a free port, for tests of anything that talks to one.

    ::

        with FakeOllamaServer() as server:
            server.script(OllamaReply(["Hel", "lo"]), OllamaReply(tool_calls=[("f", {})]))
            ...  # point the client at server.url
            assert server.chat_requests[0].json["messages"][0]["content"] == "hi"

    Also ``async with`` (asyncio and trio), or the ``fake_ollama`` pytest fixture. It
    serves HTTP/1.1 with keep-alive from a background thread, and answers as a real
    server does (``ollama-wire.md``): ``/api/chat`` checks the model, its capabilities
    (tools, thinking) and the request, then plays the next scripted reply, else the
    reply function's, else ``default_reply``, else a short greeting. The model
    ``llama3.2`` (completion and tools) exists unless ``models=False``.

    Every request is recorded in ``requests``, with whether its response completed or
    the client went away first; ``open_connections`` counts the connections open now.

    ``context_overflow`` plays what a server does with a prompt longer than its window
    (``num_ctx``, or 4096, capped at the model's ``context_length``): ``None`` (the
    default) lets every prompt through whole; ``"truncate"`` cuts it silently, as an
    older server does (``prompt_eval_count`` is the window); ``"refuse"`` answers 400
    ``exceed_context_size_error`` to a request that says ``"truncate": false`` and cuts
    the others, as a recent server does. ``evaluated`` lists the prompt tokens of each
    chat request the server answered, as it counted them.
    """

    def __init__(
        self,
        *,
        models: bool | Iterable[OllamaModel | str] = True,
        version: str = DEFAULT_VERSION,
        port: int = 0,
    ) -> None:
        self.version = version
        self.default_reply: OllamaReply | None = None
        self.pull_step_delay = 0.0
        # Raw lines a streamed pull writes after its first step (odd lines, for tests).
        self.pull_extra_lines: list[bytes] = []
        self.check_host = True
        self.context_overflow: Literal["truncate", "refuse"] | None = None
        self.evaluated: list[int] = []
        self.requests: list[RecordedRequest] = []
        self.store = ModelStore()
        self._lock = threading.Lock()
        self._script: deque[OllamaReply] = deque()
        self._function: ReplyFunction | None = None
        self._failures: list[_Failure] = []
        self._vectors: list[tuple[str, list[float]]] = []
        super().__init__(port=port)
        if models is True:
            self.add_model("llama3.2")
        elif models is not False:
            for model in models:
                if isinstance(model, str):
                    self.add_model(model)
                else:
                    self.store.add(model)

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``, as ``OLLAMA_HOST`` takes it."""
        return f"127.0.0.1:{self.port}"

    # -- scripting ---------------------------------------------------------------------

    def script(self, *replies: OllamaReply | str) -> FakeOllamaServer:
        """Queue replies for the next chat requests (a string is one text chunk)."""
        with self._lock:
            self._script.extend(_as_reply(reply) for reply in replies)
        return self

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        return len(self._script)

    def reply_with(self, function: ReplyFunction | None) -> FakeOllamaServer:
        """Compute replies from each chat request's JSON body once the script is used up."""
        if function is not None and inspect.iscoroutinefunction(function):
            raise TypeError("reply_with takes a plain function; it runs in the server thread")
        self._function = function
        return self

    def fail(
        self,
        status: int,
        error: str | None = None,
        *,
        path: str | None = None,
        times: int | None = None,
        retry_after: float | None = None,
    ) -> FakeOllamaServer:
        """Answer ``status`` (with ``{"error": error}``, or an empty body) to every request.

        ``path`` limits it to one route; ``times`` to that many requests;
        ``retry_after`` adds a ``Retry-After`` header of that many seconds.
        ``fail(503, "server busy...")`` plays an overloaded server; ``fail(403)`` a
        proxy that the host guard rejects.
        """
        body = b"" if error is None else go_json({"error": error})
        headers = () if retry_after is None else (("Retry-After", f"{retry_after:g}"),)
        with self._lock:
            self._failures.append(_Failure(status, body, path, times, headers))
        return self

    def embed_as(self, fragment: str, vector: Sequence[float]) -> FakeOllamaServer:
        """Make ``/api/embed`` answer ``vector`` for every text containing ``fragment``
        (the first such rule wins; other texts keep their hashed vectors). The vector is
        padded with zeros to the model's size and L2-normalized, so two texts given the
        same vector have a cosine similarity of 1."""
        with self._lock:
            self._vectors.append((fragment, [float(value) for value in vector]))
        return self

    def embedding_for(self, text: str) -> list[float] | None:
        """The vector ``embed_as`` set for ``text`` (unpadded), or ``None``."""
        with self._lock:
            for fragment, vector in self._vectors:
                if fragment in text:
                    return list(vector)
        return None

    def clear_failures(self) -> None:
        """Stop failing."""
        with self._lock:
            self._failures.clear()

    def next_reply(self, body: dict[str, Any]) -> OllamaReply | None:
        """The reply for a chat request: scripted, computed, or the default (``None``)."""
        with self._lock:
            if self._script:
                return self._script.popleft()
            function = self._function
        if function is not None:
            result = function(body)
            if result is not None:
                return _as_reply(result)
        return self.default_reply

    def reset(self) -> None:
        """Forget requests, script, failures and loaded models; keep the model list."""
        with self._lock:
            self._script.clear()
            self._failures.clear()
            self._vectors.clear()
            self.requests.clear()
            self.evaluated.clear()
        self.store.unload_all()
        self.context_overflow = None
        self._function = None
        self.default_reply = None

    # -- models -----------------------------------------------------------------------

    def add_model(
        self,
        name: str,
        capabilities: Sequence[str] | None = ("completion", "tools"),
        *,
        context_length: int = 131072,
        parameters: dict[str, Any] | None = None,
        family: str = "llama",
        size: int = 2019393189,
        local: bool = True,
        **fields: Any,
    ) -> OllamaModel:
        """Add (or replace) a model; ``local=False`` makes it pullable, not present.

        ``capabilities=None`` plays a server too old to report any. Other
        ``OllamaModel`` fields (``parameter_size``, ``embedding_length``...) go in
        ``fields``.
        """
        model = OllamaModel(
            name=name,
            capabilities=None if capabilities is None else list(capabilities),
            context_length=context_length,
            parameters=dict(parameters or {}),
            family=family,
            size=size,
            local=local,
            **fields,
        )
        return self.store.add(model)

    @property
    def models(self) -> list[OllamaModel]:
        """Every model the server knows, local or pullable."""
        return self.store.all()

    def find_model(self, name: str, *, local_only: bool = True) -> OllamaModel | None:
        """The model called ``name`` (``llama3.2`` finds ``llama3.2:latest``)."""
        return self.store.find(name, local_only=local_only)

    def remove_model(self, name: str) -> bool:
        """Delete a local model; False if there is none by that name."""
        return self.store.remove(name)

    # -- what happened ----------------------------------------------------------------

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The requests to ``/api/chat``, in order."""
        return self.requests_to("/api/chat")

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """The requests to ``path``, in order."""
        return [request for request in list(self.requests) if request.path == path]

    @property
    def last_request(self) -> RecordedRequest:
        """The most recent request (raises if there was none)."""
        if not self.requests:
            raise LookupError("The fake Ollama server has received no request yet.")
        return self.requests[-1]

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until every recorded request is finished; False on timeout."""
        return all(request.wait(timeout) for request in list(self.requests))

    async def wait_idle_async(self, timeout: float = 5.0) -> bool:
        """``wait_idle`` without blocking the event loop."""
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.wait_idle, timeout)

    # -- serving ----------------------------------------------------------------------

    def failure_for(self, path: str) -> tuple[int, bytes, tuple[tuple[str, str], ...]] | None:
        """The status, body and headers a ``fail()`` asks for on ``path``, if any (counts it)."""
        with self._lock:
            for failure in self._failures:
                if failure.path is not None and failure.path != path:
                    continue
                if failure.remaining is not None:
                    if failure.remaining <= 0:
                        continue
                    failure.remaining -= 1
                return failure.status, failure.body, failure.headers
        return None

    def _handle(self, request: HttpRequest, response: Response, connection: Connection) -> None:
        record = RecordedRequest(
            request.method, request.path, request.query, dict(request.headers), request.body
        )
        with self._lock:
            self.requests.append(record)
        try:
            dispatch(self, Exchange(request, response, connection, record))
        finally:
            record.status = response.status
            record._finish(completed=response.finished, disconnected=connection.disconnected)

    def __repr__(self) -> str:
        where = self.url if self._started else "not started"
        return f"<FakeOllamaServer {where}, {len(self.requests)} requests>"


def _as_reply(reply: OllamaReply | str) -> OllamaReply:
    if isinstance(reply, OllamaReply):
        return reply
    if isinstance(reply, str):
        return OllamaReply(reply)
    raise TypeError(f"a reply must be an OllamaReply or a string, not {type(reply).__name__}")
