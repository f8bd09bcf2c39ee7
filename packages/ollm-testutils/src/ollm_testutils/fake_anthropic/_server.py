"""``FakeAnthropicServer``: a real HTTP server on 127.0.0.1 that speaks the Messages API.

It follows the published reference (packages/ollm-anthropic/WIRE.md) closely enough that
the official ``anthropic`` SDK streams and parses its replies, and checks requests the way
the API does where a client can get it wrong: the ``x-api-key`` and ``anthropic-version``
headers, ``max_tokens``, empty text blocks, every ``tool_use`` answered by a
``tool_result`` in the next message, and, with thinking on, a tool loop's last assistant
message starting with the thinking blocks the server sent, signatures unchanged.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from ollm_testutils.fake_anthropic._script import (
    AnthropicReply,
    AnthropicThinking,
    anthropic_error,
)
from ollm_testutils.fake_openai._script import AUTO
from ollm_testutils.httpserver._connection import Connection, HttpRequest, Response
from ollm_testutils.httpserver._scripted import RecordedRequest, ScriptedServer

__all__ = ["AnthropicReplyFunction", "FakeAnthropicServer"]

AnthropicReplyFunction = Callable[[dict[str, Any]], "AnthropicReply | str | None"]
"""Computes the reply to a messages request from its JSON body; ``None`` for the default."""

_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"


class FakeAnthropicServer(ScriptedServer[AnthropicReply]):
    """A fake Messages API on 127.0.0.1 at a free port.

    ::

        with FakeAnthropicServer() as server:
            server.script(AnthropicReply(["Hel", "lo"]))
            provider = AnthropicProvider("test-key", base_url=server.url)
            ...
            assert server.message_requests[0].json["messages"][0]["role"] == "user"

    Settings a test can change at any time: ``api_key`` (the key it requires; ``None``
    takes any), ``models`` (the names it has), ``page_size`` (models per page of the
    list), ``events_per_write`` (SSE events per HTTP chunk).

    Messages requests play the next scripted reply, else the reply function's, else
    ``default_reply``, else a short greeting. Every request is recorded in ``requests``.
    Also ``async with``, or the ``fake_anthropic`` pytest fixture.
    """

    def __init__(
        self,
        *,
        api_key: str | None = "test-key",
        models: Iterable[str] = ("claude-sonnet-4-6", "claude-opus-4-6", "claude-3-haiku-20240307"),
        port: int = 0,
    ) -> None:
        self.api_key = api_key
        self.models: list[str] = list(models)
        self.page_size = 20
        self.events_per_write = 1
        self.signatures: set[str] = set()
        self._ids = itertools.count(1)
        super().__init__(port=port)

    # -- scripting ---------------------------------------------------------------------

    def _as_reply(self, reply: AnthropicReply | str) -> AnthropicReply:
        return AnthropicReply([reply]) if isinstance(reply, str) else reply

    def _fallback(self) -> AnthropicReply:
        return AnthropicReply(["Hello", "! How can I help?"])

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The requests to ``POST /v1/messages``."""
        return [r for r in list(self.requests) if r.path == "/v1/messages"]

    def reset(self) -> None:
        """Forget the script, the recorded requests and the reply function."""
        self._reset_script()

    # -- serving -----------------------------------------------------------------------

    def _error(
        self,
        response: Response,
        status: int,
        kind: str,
        message: str,
        headers: Iterable[tuple[str, str]] = (),
    ) -> bool:
        body = json.dumps(anthropic_error(kind, message)).encode()
        return response.send(status, body, _JSON, [("request-id", "req_fake"), *headers])

    def _json(self, response: Response, value: Any) -> bool:
        return response.send(200, json.dumps(value).encode(), _JSON)

    def _route(self, request: HttpRequest, response: Response, connection: Connection) -> bool:
        # The key comes as x-api-key (the reference's), or as a bearer token (what the
        # official SDK sends since 2026).
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        given = request.headers.get("x-api-key") or bearer
        if self.api_key is not None and given != self.api_key:
            return self._error(response, 401, "authentication_error", "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return self._error(
                response, 400, "invalid_request_error", "anthropic-version: header is required"
            )
        path = request.path.rstrip("/")
        if request.method == "GET" and path == "/v1/models":
            return self._list(response, parse_qs(request.query))
        if request.method == "GET" and path.startswith("/v1/models/"):
            name = path.removeprefix("/v1/models/")
            if name not in self.models:
                return self._error(response, 404, "not_found_error", f"model: {name}")
            return self._json(response, self._card(name))
        if request.method != "POST" or path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return self._error(response, 404, "not_found_error", "Not Found")
        try:
            body = json.loads(request.body) if request.body else None
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return self._error(
                response, 400, "invalid_request_error", "The request body is not valid JSON."
            )
        model = body.get("model")
        if model not in self.models:
            return self._error(response, 404, "not_found_error", f"model: {model}")
        problem = self._check(body, counting=path.endswith("count_tokens"))
        if problem is not None:
            return self._error(response, 400, "invalid_request_error", problem)
        if path.endswith("count_tokens"):
            return self._json(response, {"input_tokens": _prompt_tokens(body)})
        reply = self._next_reply(body)
        return self._messages(body, reply, response, connection)

    def _card(self, name: str) -> dict[str, Any]:
        return {
            "type": "model",
            "id": name,
            "display_name": name.replace("-", " ").title(),
            "created_at": "2025-09-29T00:00:00Z",
        }

    def _list(self, response: Response, query: dict[str, list[str]]) -> bool:
        try:
            limit = int((query.get("limit") or ["20"])[0])
        except ValueError:
            return self._error(response, 400, "invalid_request_error", "limit: not a number")
        after = (query.get("after_id") or [""])[0]
        start = self.models.index(after) + 1 if after in self.models else 0
        page = self.models[start : start + max(1, min(limit, self.page_size))]
        return self._json(
            response,
            {
                "data": [self._card(n) for n in page],
                "has_more": start + len(page) < len(self.models),
                "first_id": page[0] if page else None,
                "last_id": page[-1] if page else None,
            },
        )

    def _check(self, body: dict[str, Any], *, counting: bool) -> str | None:
        """What the API would refuse in a messages request (``None`` when it is fine)."""
        if not counting and not isinstance(body.get("max_tokens"), int):
            return "max_tokens: Field required"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "messages: at least one message is required"
        thinking = isinstance(body.get("thinking"), dict)
        pending: list[str] = []
        roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
        last_assistant = max((i for i, r in enumerate(roles) if r == "assistant"), default=-1)
        for n, message in enumerate(messages):
            role = roles[n]
            if role not in ("user", "assistant"):
                return f"messages.{n}.role: Input should be 'user' or 'assistant'"
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list) or not blocks:
                return f"messages.{n}: all messages must have non-empty content"
            for m, block in enumerate(blocks):
                if block.get("type") == "text" and not block.get("text"):
                    return f"messages.{n}.content.{m}.text: text content blocks must be non-empty"
                if (
                    block.get("type") == "thinking"
                    and block.get("signature") not in self.signatures
                ):
                    return f"messages.{n}.content.{m}: Invalid `signature` in `thinking` block"
            answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            if pending and sorted(map(str, answered)) != sorted(pending):
                return (
                    f"messages.{n}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(pending)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
            pending = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
            if thinking and pending and n == last_assistant:
                first = blocks[0].get("type")
                if first not in ("thinking", "redacted_thinking"):
                    return (
                        f"messages.{n}.content.0.type: Expected `thinking` or "
                        f"`redacted_thinking`, but found `{first}`. When `thinking` is enabled, "
                        "a final `assistant` message must start with a thinking block."
                    )
        if pending:
            return "messages: the last `tool_use` blocks have no `tool_result` after them"
        for tool in body.get("tools") or []:
            if (tool.get("input_schema") or {}).get("type") != "object":
                return f"tools.{tool.get('name')}.input_schema.type: Input should be 'object'"
        return None

    def _events(self, body: dict[str, Any], reply: AnthropicReply) -> tuple[list[bytes], int]:
        """The reply's SSE events, and how many come before the tool uses."""
        number = next(self._ids)
        prompt, written = _prompt_tokens(body), sum(len(t) for t in reply.pieces) // 4
        usage = (prompt, written) if reply.usage is AUTO else reply.usage
        start_usage: dict[str, Any] = {"input_tokens": usage[0] if usage else 0, "output_tokens": 1}
        if reply.cache_read is not None:
            start_usage["cache_read_input_tokens"] = reply.cache_read
        if reply.cache_creation is not None:
            start_usage["cache_creation_input_tokens"] = reply.cache_creation
        message: dict[str, Any] = {
            "id": f"msg_fake{number:08d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        }
        events = [_sse("message_start", {"type": "message_start", "message": message})]
        if reply.ping:
            events.append(_sse("ping", {"type": "ping"}))
        index = 0
        for block in reply.thinking_blocks:
            events += self._thinking(index, block)
            index += 1
        if reply.pieces:
            events.append(_start(index, {"type": "text", "text": ""}))
            for piece in reply.pieces:
                delta = {"type": "text_delta", "text": piece}
                events.append(_delta(index, delta))
            events.append(_stop(index))
            index += 1
        before = len(events)
        for call in reply.calls:
            call_id = f"toolu_fake{number:04d}{index:04d}" if call.id is AUTO else call.id
            events.append(
                _start(index, {"type": "tool_use", "id": call_id, "name": call.name, "input": {}})
            )
            if call.raw is not None:
                parts = list(call.raw)
            else:
                text = json.dumps(call.input)
                size = max(1, -(-len(text) // max(call.pieces, 1)))
                parts = [text[at : at + size] for at in range(0, len(text), size)]
            for piece in parts:
                part = {"type": "input_json_delta", "partial_json": piece}
                events.append(_delta(index, part))
            events.append(_stop(index))
            index += 1
        stop = reply.stop_reason
        if stop is AUTO:
            stop = "tool_use" if reply.calls else "end_turn"
        end_usage: dict[str, Any] = {"output_tokens": usage[1] if usage else 0}
        delta_event = {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": end_usage,
        }
        events.append(_sse("message_delta", delta_event))
        events.append(_sse("message_stop", {"type": "message_stop"}))
        return events, before

    def _thinking(self, index: int, block: AnthropicThinking) -> list[bytes]:
        if block.redacted is not None:
            start = {"type": "redacted_thinking", "data": block.redacted}
            return [_start(index, start), _stop(index)]
        signature = block.signature
        if signature is AUTO:
            text = "".join(block.pieces).encode()
            signature = "Eq" + hashlib.sha256(text).hexdigest()
        self.signatures.add(signature)
        events = [_start(index, {"type": "thinking", "thinking": "", "signature": ""})]
        for piece in block.pieces:
            events.append(_delta(index, {"type": "thinking_delta", "thinking": piece}))
        events.append(_delta(index, {"type": "signature_delta", "signature": signature}))
        events.append(_stop(index))
        return events

    def _messages(
        self,
        body: dict[str, Any],
        reply: AnthropicReply,
        response: Response,
        connection: Connection,
    ) -> bool:
        if reply.delay and not connection.wait(reply.delay):
            return False
        if reply.status >= 400:
            return response.send(
                reply.status,
                json.dumps(reply.error or {}).encode(),
                _JSON,
                list(reply.headers.items()),
            )
        if reply.raw is not None:
            response.start_chunked(200, _SSE)
            for piece in reply.raw:
                if not response.write(piece):
                    return False
            return response.end()
        events, before = self._events(body, reply)
        if not body.get("stream"):
            return self._json(response, _whole(events))
        if reply.midstream_error is not None:
            error = {"type": "error", "error": dict(reply.midstream_error)}
            events = [*events[:before], _sse("error", error)]
        return self._play(
            response,
            connection,
            events,
            before,
            end=reply.end,
            hang=reply.hang,
            chunk_delay=reply.chunk_delay,
            content_type=_SSE,
        )


def _prompt_tokens(body: dict[str, Any]) -> int:
    text = json.dumps(body.get("messages", [])) + json.dumps(body.get("system", ""))
    return max(1, len(text) // 4)


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _start(index: int, block: dict[str, Any]) -> bytes:
    event = {"type": "content_block_start", "index": index, "content_block": block}
    return _sse("content_block_start", event)


def _delta(index: int, delta: dict[str, Any]) -> bytes:
    return _sse(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    )


def _stop(index: int) -> bytes:
    return _sse("content_block_stop", {"type": "content_block_stop", "index": index})


def _whole(events: list[bytes]) -> dict[str, Any]:
    """The events of a stream as one whole message (``stream: false``)."""
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for raw in events:
        data = json.loads(raw.decode().split("data: ", 1)[1])
        kind = data["type"]
        if kind == "message_start":
            message = data["message"]
        elif kind == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif kind == "content_block_delta":
            block, delta = blocks[data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] += delta["signature"]
            elif delta["type"] == "input_json_delta":
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
        elif kind == "message_delta":
            message.update(data["delta"])
            message["usage"] = {**message.get("usage", {}), **data["usage"]}
    for index, text in partial.items():
        blocks[index]["input"] = json.loads(text)
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message
