"""One request, the response under way, and the helpers every route answers with."""

from __future__ import annotations

from dataclasses import dataclass

from ollm_testutils.fake_ollama._script import RecordedRequest
from ollm_testutils.fake_ollama._wire import ErrorBody, go_json
from ollm_testutils.httpserver._connection import Connection, HttpRequest, Response

__all__ = ["JSON", "NDJSON", "Exchange"]

NDJSON = "application/x-ndjson"
JSON = "application/json; charset=utf-8"


@dataclass(slots=True)
class Exchange:
    """What a route handler works with."""

    request: HttpRequest
    response: Response
    connection: Connection
    record: RecordedRequest

    def json(self, value: object, status: int = 200) -> None:
        """A JSON response, encoded as Go encodes it."""
        self.response.send(status, go_json(value), JSON)

    def error(self, status: int, message: str | None) -> None:
        """``status`` with ``{"error": message}``, or an empty body for ``None``."""
        if message is None:
            self.response.send(status, b"")
        else:
            self.json(ErrorBody(message), status)

    def wait(self, seconds: float | None) -> bool:
        """Wait, watching the client; False if it went away (or the server stops)."""
        return self.connection.wait(seconds)
