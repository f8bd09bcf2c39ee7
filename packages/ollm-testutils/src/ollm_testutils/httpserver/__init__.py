"""The HTTP/1.1 server under every fake server of ollm-testutils (Ollama, OpenAI, Gemini).

A real server on 127.0.0.1 with keep-alive and one thread per connection, written for
what a test needs and a framework hides: writing any bytes (a malformed line, half a
chunk), closing a connection in the middle of a body, and noticing that the client went
away while the server waits. Nothing here knows about any provider's wire format.
"""

from ollm_testutils.httpserver._connection import (
    BadRequest,
    Connection,
    HttpRequest,
    Response,
    Waker,
    json_error,
    readable,
)
from ollm_testutils.httpserver._fake import FakeServer
from ollm_testutils.httpserver._scripted import RecordedRequest, ScriptedServer
from ollm_testutils.httpserver._server import Handler, HttpServer

__all__ = [
    "BadRequest",
    "Connection",
    "FakeServer",
    "Handler",
    "HttpRequest",
    "HttpServer",
    "RecordedRequest",
    "Response",
    "ScriptedServer",
    "Waker",
    "json_error",
    "readable",
]
