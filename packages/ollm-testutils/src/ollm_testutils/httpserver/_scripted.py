"""What the fake provider servers of OpenAI and Gemini share: replies a test scripts, a
reply function, and a record of every request (marked incomplete when a client left)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Self, TypeVar

from ollm_testutils.httpserver._connection import Connection, HttpRequest, Response
from ollm_testutils.httpserver._fake import FakeServer

__all__ = ["RecordedRequest", "ScriptedServer"]

R = TypeVar("R")


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, and whether its response completed."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    completed: bool = True
    query: str = ""

    @property
    def json(self) -> Any:
        """The body as JSON (``None`` when empty)."""
        return json.loads(self.body) if self.body else None


class ScriptedServer(FakeServer, Generic[R]):
    """A fake server whose replies come from a script, then a function, then a default.

    Subclasses answer in ``_route`` (true when the response completed), turn what a test
    gives into a reply in ``_as_reply``, and say the last resort in ``_fallback``.
    """

    def __init__(self, *, port: int = 0) -> None:
        self.default_reply: R | None = None
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._script: deque[R] = deque()
        self._function: Callable[[dict[str, Any]], Any] | None = None
        super().__init__(port=port)

    def _as_reply(self, reply: Any) -> R:
        raise NotImplementedError

    def _fallback(self) -> R:
        raise NotImplementedError

    def _route(self, request: HttpRequest, response: Response, connection: Connection) -> bool:
        raise NotImplementedError

    # -- scripting ---------------------------------------------------------------------

    def script(self, *replies: Any) -> Self:
        """Queue replies for the next requests that take one (a string is one text piece)."""
        with self._lock:
            self._script.extend(self._as_reply(reply) for reply in replies)
        return self

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        return len(self._script)

    def reply_with(self, function: Callable[[dict[str, Any]], Any] | None) -> Self:
        """Compute replies from each request's JSON body once the script is used up."""
        if function is not None and inspect.iscoroutinefunction(function):
            raise TypeError("reply_with takes a plain function; it runs in the server thread")
        self._function = function
        return self

    def _reset_script(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()
        self._function = None
        self.default_reply = None

    def _next_reply(self, body: dict[str, Any]) -> R:
        with self._lock:
            if self._script:
                return self._script.popleft()
            function = self._function
        if function is not None:
            computed = function(body)
            if computed is not None:
                return self._as_reply(computed)
        return self.default_reply or self._fallback()

    # -- serving -----------------------------------------------------------------------

    def _play(
        self,
        response: Response,
        connection: Connection,
        frames: list[bytes],
        before: int,
        *,
        end: str,
        hang: bool,
        chunk_delay: float,
        content_type: str,
    ) -> bool:
        """Write ``frames`` as a chunked body, ``events_per_write`` frames a chunk (true when
        it completed): ``end="cut"`` closes the connection at frame ``before`` (the first
        after the text), ``hang`` waits there until the client leaves, ``chunk_delay``
        waits between chunks."""
        if not response.start_chunked(200, content_type):
            return False
        per_write = max(1, getattr(self, "events_per_write", 1))
        for n in range(0, len(frames), per_write):
            if end == "cut" and n >= before:
                response.abort()
                return False
            if not response.write(b"".join(frames[n : n + per_write])):
                return False
            if hang and n + per_write >= min(before, len(frames)):
                connection.wait(None)
                return False
            if chunk_delay and not connection.wait(chunk_delay):
                return False
        if end == "cut":
            response.abort()
            return False
        return response.end()

    def _handle(self, request: HttpRequest, response: Response, connection: Connection) -> None:
        # Recorded before the reply, so a client that has its answer finds it recorded;
        # marked incomplete afterwards if the client left (or was left) in the middle.
        recorded = RecordedRequest(
            request.method,
            request.path,
            dict(request.headers),
            request.body,
            query=request.query,
        )
        with self._lock:
            self.requests.append(recorded)
            index = len(self.requests) - 1
        completed = False
        try:
            completed = self._route(request, response, connection)
        finally:
            if not completed:
                with self._lock:
                    if index < len(self.requests) and self.requests[index] is recorded:
                        self.requests[index] = dataclasses.replace(recorded, completed=False)
