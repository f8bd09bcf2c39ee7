"""``FakeOpenAIServer``: a real HTTP server on 127.0.0.1 that speaks the Chat Completions API."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any

from ollm_testutils._vectors import text_vector
from ollm_testutils.fake_openai._frames import Frames, context_message, no_tools_message
from ollm_testutils.fake_openai._script import (
    Flavor,
    OpenAIReply,
    RecordedRequest,
)
from ollm_testutils.httpserver._connection import Connection, HttpRequest, Response
from ollm_testutils.httpserver._scripted import ScriptedServer

__all__ = ["FakeOpenAIServer", "ReplyFunction"]

ReplyFunction = Callable[[dict[str, Any]], "OpenAIReply | str | None"]
"""Computes the reply to a chat request from its JSON body; ``None`` for the default."""

_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"
_INVALID = "invalid_request_error"
# What each engine's model list says in `owned_by` (llama.cpp's llama-server; Ollama's
# library models; LM Studio; a LiteLLM proxy).
_OWNERS = {
    "vllm": "vllm",
    "sglang": "sglang",
    "llamacpp": "llamacpp",
    "ollama": "library",
    "lmstudio": "organization_owner",
    "litellm": "openai",
}


class FakeOpenAIServer(ScriptedServer[OpenAIReply]):
    """A fake OpenAI-compatible server on 127.0.0.1 at a free port, under ``/v1``.

    ::

        with FakeOpenAIServer(flavor="vllm") as server:
            server.script(OpenAIReply(["Hel", "lo"]), OpenAIReply(tool_calls=[("f", {})]))
            provider = OpenAIProvider(server.base_url)
            ...
            assert server.chat_requests[0].json["messages"][0]["content"] == "hi"

    ``flavor`` replays one server's wire format: its tool-call framing (split deltas
    for OpenAI, vLLM and SGLang; one whole call per delta for llama.cpp; whole calls
    without ``index`` or ``id`` and ``finish_reason: "stop"`` for LM Studio), its
    reasoning field (``reasoning_content`` for vLLM/SGLang, ``reasoning`` for
    Ollama), its error bodies and wordings (context length, no tool parser), and its
    model list (vLLM's ``max_model_len``). Settings a test can change at any time:
    ``tools_supported`` (False plays vLLM without ``--enable-auto-tool-choice``),
    ``accepts_stream_options``, ``accepts_max_tokens`` (False plays a reasoning model
    on OpenAI), ``api_key`` (required when set), ``context_window`` (refuses longer
    prompts, counted as characters / 4), ``empty_stream_over_window`` (a streamed prompt
    over ``context_window`` gets 200 and an empty stream closed at once, as
    llama-cpp-python's server answers it), ``events_per_write`` (events per HTTP chunk).

    Switches that replay what real servers do (issue 41), each off by default:

    - ``accepts_json_schema = False``: ``response_format: json_schema`` is refused
      with llama-cpp-python's HTTP 500 (a multi-line validation dump with a frame of
      the server's code); ``json_object`` is taken;
    - ``accepts_content_null = False``: an assistant message with ``"content": null``
      is refused with llama-cpp-python's HTTP 500 (a validation dump: its message types
      take ``content`` as a string);
    - ``honours_tool_choice = True``: a forced ``tool_choice`` (``required``, or a
      function) is obeyed: the reply is a call of that tool (of the first for
      ``required``) whatever the script says, so a client that forces it on every
      request loops until its turn limit;
    - ``sends_usage = False``: no usage, ever (``stream_options.include_usage``
      ignored, as llama-cpp-python's server does).

    Chat requests play the next scripted reply, else the reply function's, else
    ``default_reply``, else a short greeting. Every request is recorded in
    ``requests``. Also ``async with``, or the ``fake_openai`` pytest fixture.
    """

    def __init__(
        self,
        *,
        flavor: Flavor = "openai",
        models: Iterable[str] = ("gpt-test", "text-embedding-test"),
        port: int = 0,
    ) -> None:
        self.flavor: Flavor = flavor
        self.models: list[str] = list(models)
        self.tools_supported = True
        self.accepts_stream_options = True
        self.accepts_max_tokens = True
        self.api_key: str | None = None
        self.context_window: int | None = None
        self.empty_stream_over_window = False
        self.max_model_len = 32768
        self.embedding_dimensions = 8
        self.events_per_write = 1
        self.accepts_json_schema = True
        self.accepts_content_null = True
        self.honours_tool_choice = False
        self.sends_usage = True
        self._ids = itertools.count(1)
        super().__init__(port=port)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, as ``OPENAI_BASE_URL`` takes it."""
        return f"{self.url}/v1"

    # -- scripting ---------------------------------------------------------------------

    def _as_reply(self, reply: OpenAIReply | str) -> OpenAIReply:
        return _as_reply(reply)

    def _fallback(self) -> OpenAIReply:
        return OpenAIReply(["Hello", "! How can I help?"])

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The requests to ``/v1/chat/completions``."""
        return [r for r in list(self.requests) if r.path == "/v1/chat/completions"]

    def reset(self) -> None:
        """Forget the script, the recorded requests and the settings' changes."""
        self._reset_script()
        self.tools_supported = True
        self.accepts_stream_options = True
        self.accepts_max_tokens = True
        self.api_key = None
        self.context_window = None
        self.empty_stream_over_window = False
        self.accepts_json_schema = True
        self.accepts_content_null = True
        self.honours_tool_choice = False
        self.sends_usage = True

    # -- serving -----------------------------------------------------------------------

    def _route(self, request: HttpRequest, response: Response, connection: Connection) -> bool:
        if self.api_key is not None:
            given = request.headers.get("authorization", "")
            if given != f"Bearer {self.api_key}":
                what = "Incorrect API key provided." if given else "You didn't provide an API key."
                return self._error(response, 401, what, "invalid_request_error", "invalid_api_key")
        path, method = request.path, request.method
        if path == "/v1/models" and method == "GET":
            return self._json(response, 200, self._model_list())
        if path == "/v1/chat/completions" and method == "POST":
            return self._chat(request, response, connection)
        if path == "/v1/embeddings" and method == "POST":
            return self._embeddings(request, response)
        return self._json(response, 404, {"detail": "Not Found"})

    def _json(self, response: Response, status: int, value: Any) -> bool:
        return response.send(status, json.dumps(value).encode(), _JSON)

    def _error(
        self,
        response: Response,
        status: int,
        message: str,
        type: str | None = None,
        code: str | int | None = None,
        param: str | None = None,
    ) -> bool:
        error = {"message": message, "type": type, "param": param, "code": code}
        return self._send_error(response, status, error)

    def _send_error(
        self,
        response: Response,
        status: int,
        error: Any,
        headers: Iterable[tuple[str, str]] = (),
    ) -> bool:
        """``{"error": error}``; vLLM, SGLang and llama.cpp put the status in its ``code``."""
        if self.flavor in ("vllm", "sglang", "llamacpp") and isinstance(error, dict):
            error = {**error, "code": error.get("code") or status}
        return response.send(status, json.dumps({"error": error}).encode(), _JSON, headers)

    def _model_list(self) -> dict[str, Any]:
        data = []
        for name in self.models:
            card: dict[str, Any] = {
                "id": name,
                "object": "model",
                "created": 1700000000,
                "owned_by": _OWNERS.get(self.flavor, "system"),
            }
            if self.flavor in ("vllm", "sglang"):
                card["max_model_len"] = self.max_model_len
                card["root"] = name
            data.append(card)
        return {"object": "list", "data": data}

    def _embeddings(self, request: HttpRequest, response: Response) -> bool:
        try:
            body = json.loads(request.body)
        except ValueError:
            return self._error(response, 400, "the body is not JSON", "invalid_request_error")
        model = body.get("model")
        if model not in self.models:
            return self._error(
                response, 404, f"The model `{model}` does not exist.", "NotFoundError"
            )
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list):
            return self._error(response, 400, "input must be a list", "invalid_request_error")
        size = body.get("dimensions") or self.embedding_dimensions
        data = [
            {"object": "embedding", "index": i, "embedding": text_vector(str(t), size, salt=model)}
            for i, t in enumerate(texts)
        ]
        data.reverse()  # the order is the index's, not the list's: clients must sort
        tokens = sum(len(str(t)) for t in texts) // 4
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return self._json(
            response, 200, {"object": "list", "data": data, "model": model, "usage": usage}
        )

    def _chat(self, request: HttpRequest, response: Response, connection: Connection) -> bool:
        try:
            body = json.loads(request.body)
        except ValueError:
            return self._error(
                response, 400, "The body is not valid JSON.", "invalid_request_error"
            )
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return self._error(
                response, 400, "'messages' is a required property", "invalid_request_error"
            )
        model = body.get("model")
        if model not in self.models:
            if self.flavor == "ollama":
                message = f'model "{model}" not found, try pulling it first'
                return self._error(response, 404, message, "api_error")
            return self._error(
                response,
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                "invalid_request_error" if self.flavor == "openai" else "NotFoundError",
                "model_not_found" if self.flavor == "openai" else None,
                "model",
            )
        streaming = bool(body.get("stream"))
        if "stream_options" in body and (not self.accepts_stream_options or not streaming):
            if not streaming and self.flavor != "openai":
                pass  # most servers ignore it without stream
            else:
                return self._error(
                    response,
                    400,
                    "Unrecognized request argument supplied: stream_options",
                    "invalid_request_error",
                )
        if "max_tokens" in body and not self.accepts_max_tokens:
            return self._error(
                response,
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.",
                "invalid_request_error",
                "unsupported_parameter",
                "max_tokens",
            )
        if body.get("tools") and not self.tools_supported and body.get("tool_choice") != "none":
            return self._error(
                response,
                400,
                no_tools_message(self.flavor, model),
                "BadRequestError" if self.flavor in ("vllm", "sglang") else "invalid_request_error",
            )
        if self.context_window is not None:
            used = len(json.dumps(body["messages"])) // 4
            if used > self.context_window:
                if streaming and self.empty_stream_over_window:
                    return response.start_chunked(200, _SSE) and response.end()
                message, kind, code = context_message(self.flavor, self.context_window, used)
                return self._error(response, 400, message, kind, code)
        refused = self._llama_cpp_python_refusal(body)
        if refused is not None:
            return self._send_error(response, 500, refused)
        reply = self._next_reply(body)
        forced = self._forced_call(body)
        if forced is not None:
            reply = forced
        if not self.sends_usage:
            reply = dataclasses.replace(reply, usage=None)
        if reply.delay and not connection.wait(reply.delay):
            return False
        if reply.status >= 400:
            return self._send_error(
                response, reply.status, reply.error or {}, reply.headers.items()
            )
        if reply.raw is not None:
            response.start_chunked(200, _SSE)
            for piece in reply.raw:
                if not response.write(piece):
                    return False
            return response.end()
        if not streaming:
            return self._json(
                response,
                200,
                Frames(self.flavor).completion(body, reply, f"chatcmpl-{next(self._ids)}"),
            )
        return self._stream(body, reply, response, connection)

    def _llama_cpp_python_refusal(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """llama-cpp-python's HTTP 500 for what it cannot take (``accepts_json_schema``,
        ``accepts_content_null``), or ``None``."""
        response_format = body.get("response_format")
        if (
            not self.accepts_json_schema
            and isinstance(response_format, dict)
            and response_format.get("type") not in ("text", "json_object")
        ):
            kind = response_format.get("type")
            message = (
                "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                f"'json_object'\", 'input': {kind!r}, 'ctx': {{'expected': \"'text' or "
                '\'json_object\'"}}\n\n  File "/srv/llama_cpp/server/app.py", line 376, '
                "in create_chat_completion\n    POST /v1/chat/completions\n"
            )
            return {
                "message": message,
                "type": "internal_server_error",
                "param": None,
                "code": None,
            }
        if not self.accepts_content_null and any(
            isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
            for m in body["messages"]
        ):
            # Its pydantic union of message shapes: one error per shape (abridged).
            message = (
                "3 validation errors:\n  {'type': 'literal_error', 'loc': ('body', 'messages', "
                "1, 'ChatCompletionRequestSystemMessage', 'role'), 'msg': \"Input should be "
                "'system'\", 'input': 'assistant'}\n  {'type': 'string_type', 'loc': ('body', "
                "'messages', 1, 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': "
                "'Input should be a valid string', 'input': None}\n  {'type': 'missing', "
                "'loc': ('body', 'messages', 1, 'ChatCompletionRequestToolMessage', "
                "'tool_call_id'), 'msg': 'Field required', 'input': {'role': 'assistant'}}\n\n"
                '  File "/srv/llama_cpp/server/app.py", line 376, in create_chat_completion\n'
                "    POST /v1/chat/completions\n"
            )
            return {
                "message": message,
                "type": "internal_server_error",
                "param": None,
                "code": None,
            }
        return None

    def _forced_call(self, body: dict[str, Any]) -> OpenAIReply | None:
        """The call a forced ``tool_choice`` asks for (``honours_tool_choice``), or ``None``."""
        choice = body.get("tool_choice")
        tools = body.get("tools")
        if not self.honours_tool_choice or not tools or choice in (None, "auto", "none"):
            return None
        if isinstance(choice, dict):
            name = str(choice.get("function", {}).get("name"))
        else:
            name = str(tools[0].get("function", {}).get("name"))
        return OpenAIReply(tool_calls=[(name, {})])

    def _stream(
        self,
        body: dict[str, Any],
        reply: OpenAIReply,
        response: Response,
        connection: Connection,
    ) -> bool:
        events, text_events = Frames(self.flavor).stream(body, reply, f"chatcmpl-{next(self._ids)}")
        return self._play(
            response,
            connection,
            events,
            text_events,
            end=reply.end,
            hang=reply.hang,
            chunk_delay=reply.chunk_delay,
            content_type=_SSE,
        )


def _as_reply(reply: OpenAIReply | str) -> OpenAIReply:
    return OpenAIReply([reply]) if isinstance(reply, str) else reply
