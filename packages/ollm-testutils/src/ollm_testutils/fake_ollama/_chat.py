"""``POST /api/chat``: check a request as a real server does, then play a reply."""

from __future__ import annotations

import base64
import binascii
import string
from typing import TYPE_CHECKING, Any

import msgspec

from ollm_testutils.fake_ollama._exchange import Exchange
from ollm_testutils.fake_ollama._playback import default_reply, play, prompt_tokens
from ollm_testutils.fake_ollama._script import OllamaModel
from ollm_testutils.fake_ollama._wire import (
    ChatChunk,
    ChatRequest,
    WireError,
    WireMessage,
    canonical_name,
    decode_request,
    go_duration,
    utc_timestamp,
    valid_name,
)

if TYPE_CHECKING:
    from ollm_testutils.fake_ollama._server import FakeOllamaServer

__all__ = ["handle_chat"]

_THINK_LEVELS = ("high", "medium", "low", "max")
_BASE64 = frozenset(string.ascii_letters + string.digits + "+/=")
_encoder = msgspec.json.Encoder()

# The options the server knows, by type (api/types.go ``Options``); others are ignored.
_INT_OPTIONS = frozenset(
    [
        "num_keep",
        "seed",
        "num_predict",
        "top_k",
        "repeat_last_n",
        "num_ctx",
        "num_batch",
        "num_gpu",
        "main_gpu",
        "num_thread",
        "draft_num_predict",
    ]
)
_FLOAT_OPTIONS = frozenset(
    [
        "top_p",
        "min_p",
        "typical_p",
        "temperature",
        "repeat_penalty",
        "presence_penalty",
        "frequency_penalty",
    ]
)
_BOOL_OPTIONS = frozenset(("use_mmap",))


def handle_chat(server: FakeOllamaServer, exchange: Exchange) -> None:
    """Answer one chat request: an error as a real server gives it, or a reply."""
    try:
        chat = decode_request(exchange.request.body, ChatRequest, "ChatRequest")
        _check_fields(chat)
        name = chat.model or ""
        if not valid_name(name):
            raise WireError(400, "model is required")
        model = server.store.find(name)
        if model is None:
            raise WireError(404, f"model '{name}' not found")
        _check_capabilities(chat, model, name)
        options = chat.options or {}
        _check_options(options)
        keep_alive = go_duration(chat.keep_alive)
    except WireError as exc:
        exchange.error(exc.status, exc.message)
        return

    if not chat.messages:
        _load(server, exchange, chat, model, name, keep_alive)
        return
    if chat.format not in (None, "", "json") and not isinstance(chat.format, dict):
        raw = _encoder.encode(chat.format).decode()
        exchange.error(500, f'invalid format: {raw}; expected "json" or a valid JSON Schema object')
        return

    body = exchange.record.json if isinstance(exchange.record.json, dict) else {}
    reply = server.next_reply(body)
    if reply is None:
        reply = default_reply(_thinks(chat.think, model))
    server.store.load(model, keep_alive, options.get("num_ctx"))
    evaluated = _evaluated(server, chat, model)
    if evaluated is None:
        exchange.error(400, _too_long(chat, server.store.context(model), model))
        return
    try:
        play(reply, name, chat, exchange, evaluated)
    finally:
        if keep_alive == 0:
            server.store.unload(model)


def _evaluated(server: FakeOllamaServer, chat: ChatRequest, model: OllamaModel) -> int | None:
    """The prompt tokens the server evaluates, or ``None`` when it refuses the prompt.

    As a real server does with ``server.context_overflow`` set: the window is the one
    loaded (``num_ctx``), capped at the model's trained length; a longer prompt is cut
    to the window (``"truncate"``, an older server; or ``"refuse"`` when the request
    leaves ``truncate`` unset or true), or refused with llama.cpp's 400 (``"refuse"``
    with ``"truncate": false``). Each count is recorded in ``server.evaluated``.
    """
    tokens = prompt_tokens(chat)
    window = min(server.store.context(model), model.context_length)
    overflow = server.context_overflow
    if overflow is not None and tokens > window:
        if overflow == "refuse" and chat.truncate is False:
            return None
        tokens = window
    with server._lock:
        server.evaluated.append(tokens)
    return tokens


def _too_long(chat: ChatRequest, context: int, model: OllamaModel) -> str:
    """Ollama's refusal of a prompt too long: llama.cpp's error as JSON, in a string."""
    tokens = prompt_tokens(chat)
    window = min(context, model.context_length)
    inner = {
        "error": {
            "code": 400,
            "message": f"request ({tokens} tokens) exceeds the available context size "
            f"({window} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": tokens,
            "n_ctx": window,
        }
    }
    return _encoder.encode(inner).decode()


def _load(
    server: FakeOllamaServer,
    exchange: Exchange,
    chat: ChatRequest,
    model: OllamaModel,
    name: str,
    keep_alive: float | None,
) -> None:
    """No messages: load the model (or unload it with ``keep_alive: 0``), one object."""
    unload = keep_alive == 0
    if unload:
        server.store.unload(model)
    else:
        server.store.load(model, keep_alive, (chat.options or {}).get("num_ctx"))
    exchange.json(
        ChatChunk(
            model=name,
            created_at=utc_timestamp(),
            message=WireMessage(role="assistant", content=""),
            done_reason="unload" if unload else "load",
            done=True,
        )
    )


def _check_fields(chat: ChatRequest) -> None:
    think = chat.think
    if think is not None and not isinstance(think, bool) and think not in _THINK_LEVELS:
        raw = _encoder.encode(think).decode()
        raise WireError(
            400,
            f'invalid think value: {raw} (must be "high", "medium", "low", "max", true, or false)',
        )
    if chat.top_logprobs is not None and not 0 <= chat.top_logprobs <= 20:
        raise WireError(400, "top_logprobs must be between 0 and 20")
    for message in chat.messages or ():
        for image in message.images or ():
            _check_base64(image)


def _check_base64(data: str) -> None:
    """Images are raw standard base64; Go names the first byte it cannot decode."""
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        position = next((i for i, c in enumerate(data) if c not in _BASE64), None)
        if position is None:
            position = len(data) - len(data) % 4
        raise WireError(400, f"illegal base64 data at input byte {position}") from None


def _thinks(think: Any, model: OllamaModel) -> bool:
    if think is None:
        # Since v0.12.4 a thinking model thinks unless told not to.
        return "thinking" in (model.capabilities or ())
    return think is not False


def _check_capabilities(chat: ChatRequest, model: OllamaModel, name: str) -> None:
    capabilities = model.capabilities
    if capabilities is None:
        return  # an old server that knows no capabilities lets everything through
    if "completion" not in capabilities:
        raise WireError(400, f'"{name}" does not support chat')
    if chat.tools and "tools" not in capabilities:
        raise WireError(400, f"{canonical_name(name)} does not support tools")
    if chat.think not in (None, False) and "thinking" not in capabilities:
        raise WireError(400, f'"{name}" does not support thinking')


def _check_options(options: dict[str, Any]) -> None:
    """Wrongly typed options fail with 500, as ``handleScheduleError`` answers them."""
    for key, value in options.items():
        if key in _INT_OPTIONS or key in _FLOAT_OPTIONS:
            kind = "integer" if key in _INT_OPTIONS else "float"
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise WireError(500, f'option "{key}" must be of type {kind}')
        elif key in _BOOL_OPTIONS and not isinstance(value, bool):
            raise WireError(500, f'option "{key}" must be of type boolean')
        elif key == "stop":
            if not isinstance(value, list):
                raise WireError(500, 'option "stop" must be of type array')
            if not all(isinstance(item, str) for item in value):
                raise WireError(500, 'option "stop" must be of type array of strings')
