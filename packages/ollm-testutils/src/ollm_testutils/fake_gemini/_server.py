"""``FakeGeminiServer``: a real HTTP server on 127.0.0.1 that speaks the Gemini REST API.

It follows the published reference (packages/ollm-gemini/WIRE.md) and checks requests
the way the API does where a client can get it wrong: the key header, the shape of
``contents`` (roles, non-empty parts, as many ``functionResponse`` parts as the model's
turn had calls), function names, schema types (in either case: Google's own REST
examples write ``"type": "object"``), and for ``gemini-3`` models
the thought signature of the first call of each model turn.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from ollm_testutils._vectors import text_vector
from ollm_testutils.fake_gemini._script import GeminiCall, GeminiReply, google_error
from ollm_testutils.fake_openai._script import AUTO
from ollm_testutils.httpserver._connection import Connection, HttpRequest, Response
from ollm_testutils.httpserver._scripted import RecordedRequest, ScriptedServer

__all__ = ["FakeGeminiServer", "GeminiReplyFunction"]

GeminiReplyFunction = Callable[[dict[str, Any]], "GeminiReply | str | None"]
"""Computes the reply to a generate request from its JSON body; ``None`` for the default."""

_JSON = "application/json; charset=UTF-8"
_SSE = "text/event-stream"
_ROUTE = re.compile(r"/(v1beta|v1|v1alpha)/((?:models|tunedModels)/[^:]+)(?::(\w+))?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]{0,63}")
_TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"}
_NO_KEY = (
    "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API."
)


class FakeGeminiServer(ScriptedServer[GeminiReply]):
    """A fake Gemini API on 127.0.0.1 at a free port.

    ::

        with FakeGeminiServer() as server:
            server.script(GeminiReply(["Hel", "lo"]), GeminiReply(calls=[("f", {})]))
            provider = GeminiProvider("test-key", base_url=server.url)
            ...
            assert server.generate_requests[0].json["contents"][0]["role"] == "user"

    Settings a test can change at any time: ``api_key`` (the key it requires; ``None``
    takes any), ``models`` (name to input token limit), ``page_size`` (models per page
    of the list), ``events_per_write`` (SSE events per HTTP chunk), ``line_end``
    (``"\\r\\n"`` as Google sends it, or ``"\\n"``).

    Generate requests play the next scripted reply, else the reply function's, else
    ``default_reply``, else a short greeting. Every request is recorded in
    ``requests``. Also ``async with``, or the ``fake_gemini`` pytest fixture.
    """

    def __init__(
        self,
        *,
        api_key: str | None = "test-key",
        models: Iterable[str] = (
            "gemini-2.5-flash",
            "gemini-2.5-pro",
            "gemini-3-pro-preview",
            "gemini-embedding-001",
        ),
        port: int = 0,
    ) -> None:
        self.api_key = api_key
        self.models: dict[str, int] = dict.fromkeys(models, 1048576)
        self.page_size = 50
        self.events_per_write = 1
        self.line_end = "\r\n"
        self.embedding_dimensions = 8
        self._ids = itertools.count(1)
        super().__init__(port=port)

    # -- scripting ---------------------------------------------------------------------

    def _as_reply(self, reply: GeminiReply | str) -> GeminiReply:
        return _as_reply(reply)

    def _fallback(self) -> GeminiReply:
        return GeminiReply(["Hello", "! How can I help?"])

    @property
    def generate_requests(self) -> list[RecordedRequest]:
        """The requests to ``generateContent`` and ``streamGenerateContent``."""
        return [r for r in list(self.requests) if r.path.lower().endswith("generatecontent")]

    def reset(self) -> None:
        """Forget the script, the recorded requests and the reply function."""
        self._reset_script()

    # -- serving -----------------------------------------------------------------------

    def _error(
        self,
        response: Response,
        code: int,
        message: str,
        status: str,
        details: Iterable[dict[str, Any]] = (),
    ) -> bool:
        body = google_error(code, message, status, list(details))
        return response.send(code, json.dumps(body).encode(), _JSON)

    def _json(self, response: Response, value: Any) -> bool:
        return response.send(200, json.dumps(value).encode(), _JSON)

    def _route(self, request: HttpRequest, response: Response, connection: Connection) -> bool:
        query = parse_qs(request.query)
        if self.api_key is not None:
            given = request.headers.get("x-goog-api-key") or (query.get("key") or [""])[0]
            if not given:
                return self._error(response, 403, _NO_KEY, "PERMISSION_DENIED")
            if given != self.api_key:
                info = {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                }
                return self._error(
                    response,
                    400,
                    "API key not valid. Please pass a valid API key.",
                    "INVALID_ARGUMENT",
                    [info],
                )
        match = _ROUTE.fullmatch(request.path)
        if request.path.rstrip("/") in ("/v1beta/models", "/v1/models") and request.method == "GET":
            return self._list(response, query)
        if match is None:
            return self._error(response, 404, "Not Found", "NOT_FOUND")
        name = match.group(2).removeprefix("models/")
        method = match.group(3)
        if name not in self.models:
            return self._error(
                response,
                404,
                f"models/{name} is not found for API version {match.group(1)}, or is not "
                "supported for generateContent. Call ListModels to see the list of available "
                "models and their supported methods.",
                "NOT_FOUND",
            )
        if method is None and request.method == "GET":
            return self._json(response, self._card(name))
        try:
            body = json.loads(request.body) if request.body else {}
        except ValueError:
            return self._error(response, 400, "Invalid JSON payload received.", "INVALID_ARGUMENT")
        if not isinstance(body, dict):
            return self._error(response, 400, "Invalid JSON payload.", "INVALID_ARGUMENT")
        if method in ("streamGenerateContent", "generateContent"):
            problem = self._check(name, body)
            if problem is not None:
                return self._error(response, 400, problem, "INVALID_ARGUMENT")
            reply = self._next_reply(body)
            return self._generate(
                name,
                body,
                reply,
                response,
                connection,
                stream=method == "streamGenerateContent",
                sse=(query.get("alt") or [""])[0] == "sse",
            )
        if method == "countTokens":
            inner = body.get("generateContentRequest", body)
            text = json.dumps(inner.get("contents", [])) + json.dumps(
                inner.get("systemInstruction", "")
            )
            return self._json(response, {"totalTokens": max(1, len(text) // 4)})
        if method == "batchEmbedContents":
            return self._embed(name, body, response)
        return self._error(response, 404, f"Method {method} not found.", "NOT_FOUND")

    def _card(self, name: str) -> dict[str, Any]:
        embedding = "embedding" in name
        return {
            "name": f"models/{name}",
            "version": "001",
            "displayName": name.replace("-", " ").title(),
            "description": f"The fake {name}.",
            "inputTokenLimit": self.models[name],
            "outputTokenLimit": 2048 if embedding else 65536,
            "supportedGenerationMethods": (
                ["embedContent", "batchEmbedContents"]
                if embedding
                else ["generateContent", "countTokens", "createCachedContent"]
            ),
            **({} if embedding else {"temperature": 1, "topP": 0.95, "topK": 64}),
            **({} if embedding else {"thinking": True}),
        }

    def _list(self, response: Response, query: dict[str, list[str]]) -> bool:
        names = list(self.models)
        try:
            size = int((query.get("pageSize") or ["50"])[0])
            start = int((query.get("pageToken") or ["0"])[0].removeprefix("page-"))
        except ValueError:
            return self._error(response, 400, "Invalid page token.", "INVALID_ARGUMENT")
        size = max(1, min(size, self.page_size))
        page: dict[str, Any] = {"models": [self._card(n) for n in names[start : start + size]]}
        if start + size < len(names):
            page["nextPageToken"] = f"page-{start + size}"
        return self._json(response, page)

    def _embed(self, name: str, body: dict[str, Any], response: Response) -> bool:
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return self._error(response, 400, "requests must not be empty", "INVALID_ARGUMENT")
        if len(requests) > 100:
            return self._error(
                response,
                400,
                "* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch",
                "INVALID_ARGUMENT",
            )
        embeddings = []
        for one in requests:
            if one.get("model") != f"models/{name}":
                return self._error(
                    response,
                    400,
                    f"Model name in request must match the model in the URL: models/{name}",
                    "INVALID_ARGUMENT",
                )
            parts = (one.get("content") or {}).get("parts") or []
            text = "".join(str(p.get("text", "")) for p in parts)
            size = one.get("outputDimensionality") or self.embedding_dimensions
            embeddings.append({"values": text_vector(text, size, salt=name)})
        return self._json(response, {"embeddings": embeddings})

    def _check(self, model: str, body: dict[str, Any]) -> str | None:
        """What the API would refuse in a generate request (``None`` when it is fine)."""
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            return "* GenerateContentRequest.contents: contents is not specified"
        calls_pending = 0
        for n, content in enumerate(contents):
            role = content.get("role")
            parts = content.get("parts")
            if role not in ("user", "model"):
                return f"Please use a valid role: user, model. (contents[{n}].role: {role!r})"
            if not isinstance(parts, list) or not parts:
                return (
                    f"* GenerateContentRequest.contents[{n}].parts: contents.parts must not "
                    "be empty."
                )
            calls = [p for p in parts if "functionCall" in p]
            responses = [p for p in parts if "functionResponse" in p]
            if responses and len(responses) != calls_pending:
                return (
                    "Please ensure that the number of function response parts is equal to the "
                    "number of function call parts of the function call turn."
                )
            for part in responses:
                answer = part["functionResponse"]
                if not isinstance(answer.get("response"), dict) or not answer.get("name"):
                    return f"* contents[{n}]: functionResponse needs a name and a response object."
            if calls and model.startswith("gemini-3") and not calls[0].get("thoughtSignature"):
                return (
                    f"Function call is missing a thought_signature in functionCall parts. This "
                    f"is required for tools to work correctly, and missing thought_signature "
                    f"may lead to degraded model performance. Additional data, function call "
                    f"`default_api:{calls[0]['functionCall'].get('name')}` , position {n + 1}."
                )
            for part in calls:
                if not isinstance(part["functionCall"].get("args", {}), dict):
                    return f"* contents[{n}]: functionCall.args must be an object."
            calls_pending = len(calls) if role == "model" else 0 if responses else calls_pending
        for tool in body.get("tools") or []:
            for declaration in tool.get("functionDeclarations") or []:
                name = declaration.get("name", "")
                if not _NAME.fullmatch(str(name)):
                    return (
                        f"* GenerateContentRequest.tools[0].function_declarations: [FIELD_INVALID] "
                        f"Invalid function name {name!r}."
                    )
                if "parameters" in declaration and "parametersJsonSchema" in declaration:
                    return "parameters and parametersJsonSchema are mutually exclusive"
                problem = _check_schema(declaration.get("parameters"), f"{name}.parameters")
                if problem is not None:
                    return problem
        return None

    def _events(
        self, model: str, body: dict[str, Any], reply: GeminiReply
    ) -> tuple[list[dict[str, Any]], int]:
        """The responses of one reply, and how many of them come before the calls."""
        version = f"{model}-fake"
        response_id = f"resp-{next(self._ids)}"
        if reply.block_reason is not None:
            feedback: dict[str, Any] = {"blockReason": reply.block_reason}
            if reply.safety_ratings:
                feedback["safetyRatings"] = list(reply.safety_ratings)
            return [{"promptFeedback": feedback, "modelVersion": version}], 0
        prompt = max(1, len(json.dumps(body.get("contents", []))) // 4)
        pieces: list[list[dict[str, Any]]] = []
        pieces += [[{"text": t, "thought": True}] for t in reply.thought_pieces]
        pieces += [[{"text": t}] for t in reply.pieces]
        text_events = len(pieces)
        calls = reply.function_calls
        per = reply.calls_per_event or max(len(calls), 1)
        for start in range(0, len(calls), per):
            pieces.append(
                [
                    _call_part(call, start + i == 0)
                    for i, call in enumerate(calls[start : start + per])
                ]
            )
        if not pieces:
            pieces.append([])
        written = sum(len(t) for t in reply.pieces) // 4
        thought = sum(len(t) for t in reply.thought_pieces) // 4
        if reply.usage is AUTO:
            usage: tuple[int, ...] | None = (prompt, written, thought)
        else:
            usage = reply.usage
        events = []
        for n, parts in enumerate(pieces):
            candidate: dict[str, Any] = {"index": 0}
            if parts:
                candidate["content"] = {"parts": parts, "role": "model"}
            event: dict[str, Any] = {"candidates": [candidate]}
            last = n == len(pieces) - 1
            if last and reply.finish_reason is not None:
                candidate["finishReason"] = (
                    "STOP" if reply.finish_reason is AUTO else reply.finish_reason
                )
                if reply.finish_message:
                    candidate["finishMessage"] = reply.finish_message
                if reply.safety_ratings:
                    candidate["safetyRatings"] = list(reply.safety_ratings)
            if usage is not None:
                meta: dict[str, Any] = {"promptTokenCount": usage[0]}
                if last:
                    meta["candidatesTokenCount"] = usage[1]
                    if len(usage) > 2 and usage[2]:
                        meta["thoughtsTokenCount"] = usage[2]
                    meta["totalTokenCount"] = sum(usage)
                    if reply.cached:
                        meta["cachedContentTokenCount"] = reply.cached
                event["usageMetadata"] = meta
            event["modelVersion"] = version
            event["responseId"] = response_id
            events.append(event)
        return events, text_events

    def _generate(
        self,
        model: str,
        body: dict[str, Any],
        reply: GeminiReply,
        response: Response,
        connection: Connection,
        *,
        stream: bool,
        sse: bool,
    ) -> bool:
        if reply.delay and not connection.wait(reply.delay):
            return False
        if reply.status >= 400:
            return response.send(reply.status, json.dumps(reply.error or {}).encode(), _JSON)
        if reply.raw is not None:
            response.start_chunked(200, _SSE)
            for piece in reply.raw:
                if not response.write(piece):
                    return False
            return response.end()
        events, text_events = self._events(model, body, reply)
        if not stream:
            return self._json(response, _merge(events))
        if not sse:
            return self._json(response, events)  # a JSON array, as without alt=sse
        end = self.line_end
        frames = [f"data: {json.dumps(e)}{end}{end}".encode() for e in events]
        if reply.midstream_error is not None:
            error = f"data: {json.dumps(reply.midstream_error)}{end}{end}".encode()
            frames = [*frames[:text_events], error]
        return self._play(
            response,
            connection,
            frames,
            text_events,
            end=reply.end,
            hang=reply.hang,
            chunk_delay=reply.chunk_delay,
            content_type=_SSE,
        )


def _call_part(call: GeminiCall, first: bool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": call.name, "args": call.args}
    if call.id is not None:
        function["id"] = call.id
    part: dict[str, Any] = {"functionCall": function}
    signature = call.signature
    if signature is AUTO:
        signature = f"c2lnbmF0dXJl{call.name}" if first else None
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def _merge(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The events of a stream as one whole response (``generateContent``)."""
    if not events or "candidates" not in events[-1]:
        return events[-1] if events else {}
    parts: list[dict[str, Any]] = []
    for event in events:
        parts.extend(event["candidates"][0].get("content", {}).get("parts", []))
    whole = dict(events[-1])
    candidate = dict(whole["candidates"][0])
    candidate["content"] = {"parts": parts, "role": "model"}
    whole["candidates"] = [candidate]
    return whole


def _check_schema(schema: Any, where: str) -> str | None:
    if schema is None:
        return None
    if not isinstance(schema, dict):
        return f"* {where}: a schema must be an object"
    kind = schema.get("type")
    if kind is None and "anyOf" not in schema:
        return f"* {where}.type: must be specified"
    # The API takes its Type enum's names in any case ("OBJECT" or "object").
    if kind is not None and (not isinstance(kind, str) or kind.upper() not in _TYPES):
        return f"* {where}.type: Invalid value {kind!r}"
    for key in ("$ref", "$defs", "additionalProperties", "oneOf", "allOf", "const", "$schema"):
        if key in schema:
            return f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}'"
    enum = schema.get("enum")
    if enum is not None and not all(isinstance(v, str) for v in enum):
        return f"* {where}.enum: only strings are allowed"
    for name, value in (schema.get("properties") or {}).items():
        problem = _check_schema(value, f"{where}.properties[{name}]")
        if problem is not None:
            return problem
    if "items" in schema:
        problem = _check_schema(schema["items"], f"{where}.items")
        if problem is not None:
            return problem
    for n, option in enumerate(schema.get("anyOf") or []):
        problem = _check_schema(option, f"{where}.anyOf[{n}]")
        if problem is not None:
            return problem
    return None


def _as_reply(reply: GeminiReply | str) -> GeminiReply:
    return GeminiReply([reply]) if isinstance(reply, str) else reply
