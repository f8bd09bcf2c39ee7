"""Wires: what a cassette needs to know of a provider's HTTP API.

A wire names the fake server that replays its recordings (ollm-testutils' own, so the
replies go out over real HTTP as that server frames them), the fields of its requests
that change from run to run (ids of tool calls that a client makes up), and how its
server words an error. ``ollama``, ``openai`` (every OpenAI-compatible server),
``gemini`` and ``anthropic`` (the Messages API) are built in; another package adds its
own with ``register_wire``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ollm_testutils.httpserver import FakeServer

__all__ = ["DEFAULT_VOLATILE", "Wire", "get_wire", "register_wire", "wire_names"]

DEFAULT_VOLATILE: frozenset[str] = frozenset({"id", "tool_call_id", "call_id"})
"""Fields whose values a client makes up afresh each run (tool calls' ids)."""


def _ollama_error(status: int, message: str) -> bytes:
    return json.dumps({"error": message}).encode()


def _openai_error(status: int, message: str) -> bytes:
    error = {"message": message, "type": "cassette_miss", "param": None, "code": None}
    return json.dumps({"error": error}).encode()


def _gemini_error(status: int, message: str) -> bytes:
    error = {"code": status, "message": message, "status": "INTERNAL"}
    return json.dumps({"error": error}).encode()


def _anthropic_error(status: int, message: str) -> bytes:
    return json.dumps(
        {"type": "error", "error": {"type": "api_error", "message": message}}
    ).encode()


def _ollama_server() -> FakeServer:
    from ollm_testutils.fake_ollama import FakeOllamaServer

    return FakeOllamaServer()


def _openai_server() -> FakeServer:
    from ollm_testutils.fake_openai import FakeOpenAIServer

    return FakeOpenAIServer()


def _gemini_server() -> FakeServer:
    from ollm_testutils.fake_gemini import FakeGeminiServer

    return FakeGeminiServer()


def _anthropic_server() -> FakeServer:
    from ollm_testutils.fake_anthropic import FakeAnthropicServer

    return FakeAnthropicServer()


@dataclass(frozen=True)
class Wire:
    """One HTTP API a cassette records and replays.

    ``server`` builds the (not started) fake server that replays it; ``error_body``
    makes the body of an error reply as its server words them (status, message);
    ``volatile`` names the JSON fields of a request whose values are made up each run
    and are normalised in the request's key (``<id-1>``, ``<id-2>``... in order of
    first appearance, so a call and its result still pair up).
    """

    name: str
    server: Callable[[], FakeServer]
    error_body: Callable[[int, str], bytes] = _ollama_error
    volatile: frozenset[str] = field(default=DEFAULT_VOLATILE)


_lock = threading.Lock()
_WIRES: dict[str, Wire] = {
    "ollama": Wire("ollama", _ollama_server, _ollama_error),
    "openai": Wire("openai", _openai_server, _openai_error),
    "gemini": Wire("gemini", _gemini_server, _gemini_error),
    # A tool result names its call by ``tool_use_id``.
    "anthropic": Wire(
        "anthropic", _anthropic_server, _anthropic_error, DEFAULT_VOLATILE | {"tool_use_id"}
    ),
}


def register_wire(wire: Wire, *, replace: bool = False) -> None:
    """Make ``wire`` known to every cassette (``cassette.url(..., wire=wire.name)``)."""
    if not isinstance(wire, Wire):
        raise TypeError("register_wire takes an ollm_testutils.cassette.Wire")
    with _lock:
        if wire.name in _WIRES and not replace:
            raise ValueError(f"a wire named {wire.name!r} is already registered")
        _WIRES[wire.name] = wire


def get_wire(name: str) -> Wire:
    """The wire registered as ``name``."""
    with _lock:
        wire = _WIRES.get(name)
        if wire is None:
            known = ", ".join(sorted(_WIRES))
            raise ValueError(
                f"No cassette wire is named {name!r}. Known: {known} "
                "(another is added with ollm_testutils.cassette.register_wire)."
            )
        return wire


def wire_names() -> list[str]:
    """The names of the wires known now."""
    with _lock:
        return sorted(_WIRES)
