"""Which handler answers a request, and what comes before any handler: the faults a
test asked for, Ollama's host guard, and gin's 404, 405 and trailing-slash redirects."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from ollm_testutils.fake_ollama import _embed, _models
from ollm_testutils.fake_ollama._chat import handle_chat
from ollm_testutils.fake_ollama._exchange import JSON, Exchange

if TYPE_CHECKING:
    from ollm_testutils.fake_ollama._server import FakeOllamaServer

__all__ = ["ROUTES", "allowed_host", "dispatch"]

Route = Callable[["FakeOllamaServer", Exchange], None]


def _root(server: FakeOllamaServer, exchange: Exchange) -> None:
    exchange.response.send(200, b"Ollama is running", "text/plain; charset=utf-8")


def _version(server: FakeOllamaServer, exchange: Exchange) -> None:
    exchange.json({"version": server.version})


ROUTES: dict[str, dict[str, Route]] = {
    "/": {"GET": _root, "HEAD": _root},
    "/api/version": {"GET": _version, "HEAD": _version},
    "/api/tags": {"GET": _models.handle_tags, "HEAD": _models.handle_tags},
    "/api/chat": {"POST": handle_chat},
    "/api/show": {"POST": _models.handle_show},
    "/api/pull": {"POST": _models.handle_pull},
    "/api/delete": {"DELETE": _models.handle_delete},
    "/api/copy": {"POST": _models.handle_copy},
    "/api/ps": {"GET": _models.handle_ps},
    "/api/embed": {"POST": _embed.handle_embed},
    "/api/embeddings": {"POST": _embed.handle_embeddings},
}


def dispatch(server: FakeOllamaServer, exchange: Exchange) -> None:
    """Answer one request."""
    request, response = exchange.request, exchange.response
    failure = server.failure_for(request.path)
    if failure is not None:
        status, body, headers = failure
        response.send(status, body, JSON if body else None, headers)
        return
    if server.check_host and not allowed_host(request.headers.get("host", "")):
        response.send(403, b"")
        return
    methods = ROUTES.get(request.path)
    if methods is None:
        trimmed = request.path.rstrip("/")
        if trimmed != request.path and trimmed in ROUTES:
            status = 301 if request.method in ("GET", "HEAD") else 307
            body = f'<a href="{trimmed}">Moved Permanently</a>.\n\n'.encode()
            response.send(status, body, "text/html; charset=utf-8")
            return
        response.send(404, b"404 page not found", "text/plain")
        return
    route = methods.get(request.method)
    if route is None:
        response.send(405, b"405 method not allowed", "text/plain")
        return
    route(server, exchange)


def allowed_host(host_header: str) -> bool:
    """Ollama's ``allowedHostsMiddleware`` for a server bound to loopback."""
    host = host_header.lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    if host in ("", "localhost") or host == socket.gethostname().lower():
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return any(host.endswith(f".{tld}") for tld in ("localhost", "local", "internal"))
    return address.is_loopback or address.is_private or address.is_unspecified
