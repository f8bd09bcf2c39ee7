"""ollm's requests as ``generateContent`` bodies (WIRE.md, "Requests").

- The system prompt is ``systemInstruction``; messages are ``contents`` with the roles
  ``user`` and ``model``; consecutive messages of one role share one content (the API
  wants turns, and parallel calls' results in one content, in the calls' order).
- Images are ``inlineData`` (base64). A tool result is a ``functionResponse`` part: the
  function's name, its ``id`` when the API gave the call one, and ``{"result": text}``
  (``{"error": text}`` for a failure). A tool's images follow in a user content.
- An assistant's calls are ``functionCall`` parts with their ``thoughtSignature``; a
  Gemini 3 model refuses a current call without one, so a call that has none (from
  another provider, or written by hand) gets the documented placeholder.
- Thinking is not sent back: the signatures carry the model's reasoning.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from ollm.errors import InvalidRequestError
from ollm.types import ImagePart, Message, ProviderRequest, TextPart, ToolCall, ToolSchema
from ollm_gemini._schema import Unexpressible, check_tool_name, to_gemini_schema
from ollm_http import option_number, stop_sequences

__all__ = [
    "MAX_STOP_SEQUENCES",
    "SKIP_SIGNATURE",
    "build_body",
    "contents_of",
    "thinking_notice",
    "tools_of",
]

# The placeholder Google documents for a call whose signature is not known.
SKIP_SIGNATURE = "skip_thought_signature_validator"
MAX_STOP_SEQUENCES = 5
# The ids ollm makes for calls the API gave none: not sent back, the API did not make them.
_OWN_ID = re.compile(r"call_(?:\d+|[0-9a-f]{24})")
# Request fields a caller may set through options.extra (the rest is generationConfig).
_TOP_LEVEL = frozenset({"safetySettings", "cachedContent", "toolConfig", "labels"})
_BUDGETS = {"minimal": 128, "low": 1024, "medium": 8192, "high": 24576}


def _inline(part: ImagePart) -> dict[str, Any]:
    data = base64.b64encode(part.data).decode("ascii")
    return {"inlineData": {"mimeType": part.mime_type, "data": data}}


def _parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                parts.append({"text": part.text})
        else:
            parts.append(_inline(part))
    return parts


def _gemini_3(model: str) -> bool:
    return model.removeprefix("models/").startswith("gemini-3")


def _call_part(call: ToolCall, first: bool, placeholder: bool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": call.name, "args": call.args}
    if call.id and not _OWN_ID.fullmatch(call.id):
        function["id"] = call.id
    part: dict[str, Any] = {"functionCall": function}
    if call.signature:
        part["thoughtSignature"] = call.signature
    elif first and placeholder:
        part["thoughtSignature"] = SKIP_SIGNATURE
    return part


def contents_of(request: ProviderRequest) -> list[dict[str, Any]]:
    """The request's messages as ``contents``."""
    contents: list[dict[str, Any]] = []
    # The name of each call by id, for results that do not say it.
    names: dict[str, str] = {}
    placeholder = _gemini_3(request.model)

    def add(role: str, parts: list[dict[str, Any]], kind: str) -> None:
        if not parts:
            return
        last = contents[-1] if contents else None
        if last is not None and last["role"] == role and last["_kind"] == kind:
            last["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts, "_kind": kind})

    for message in request.messages:
        role = message.role
        if role == "assistant":
            parts = _parts(message)
            first = True
            for call in message.tool_calls:
                names[call.id] = call.name
                parts.append(_call_part(call, first, placeholder))
                first = False
            add("model", parts, "model")
        elif role == "tool" and message.tool_call_id is not None:
            name = message.name or names.get(message.tool_call_id) or "tool"
            text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
            response: dict[str, Any] = {
                "name": name,
                "response": {"error": text} if message.is_error else {"result": text},
            }
            if not _OWN_ID.fullmatch(message.tool_call_id):
                response["id"] = message.tool_call_id
            add("user", [{"functionResponse": response}], "results")
            images = [p for p in message.parts if isinstance(p, ImagePart)]
            if images:
                said = {"text": f"The images the tool {name!r} returned:"}
                add("user", [said, *(_inline(i) for i in images)], "images")
        else:
            # user, system in the history, and a strategy's results written as text.
            add("user", _parts(message), "user")
    for content in contents:
        del content["_kind"]
    return contents


def tools_of(tools: tuple[ToolSchema, ...], *, json_schema: bool) -> list[dict[str, Any]]:
    """``[{"functionDeclarations": [...]}]`` for the offered tools.

    A tool whose parameters the ``Schema`` subset cannot say is sent with
    ``parametersJsonSchema`` when ``json_schema`` (v1beta), else refused clearly.
    """
    declarations: list[dict[str, Any]] = []
    for tool in tools:
        problem = check_tool_name(tool.name)
        if problem is not None:
            raise InvalidRequestError(
                f"The tool {tool.name!r} cannot be offered to Gemini: {problem}. Rename it."
            )
        declaration: dict[str, Any] = {"name": tool.name}
        if tool.description:
            declaration["description"] = tool.description
        parameters = tool.parameters or {}
        if parameters.get("properties") or parameters.get("$ref") or parameters.get("anyOf"):
            try:
                converted = to_gemini_schema(parameters)
            except Unexpressible as exc:
                if not json_schema:
                    raise InvalidRequestError(
                        f"The parameters of the tool {tool.name!r} cannot be written for "
                        f"Gemini: {exc.field} {exc.reason}. Give that field a type, or use "
                        "the v1beta API (OLLM_GEMINI_API_VERSION=v1beta), which takes full "
                        "JSON Schema."
                    ) from None
                declaration["parametersJsonSchema"] = parameters
            else:
                if converted.get("type") != "OBJECT":
                    raise InvalidRequestError(
                        f"The parameters of the tool {tool.name!r} are not an object "
                        "schema; Gemini takes the arguments as an object of named fields."
                    )
                declaration["parameters"] = converted
        declarations.append(declaration)
    return [{"functionDeclarations": declarations}]


def _tool_config(choice: str, tools: tuple[ToolSchema, ...]) -> dict[str, Any] | None:
    if choice == "auto":
        return None
    if choice == "none":
        return {"functionCallingConfig": {"mode": "NONE"}}
    if choice == "required":
        return {"functionCallingConfig": {"mode": "ANY"}}
    if any(tool.name == choice for tool in tools):
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice]}}
    raise InvalidRequestError(
        f"tool_choice {choice!r} is none of 'auto', 'none', 'required' or the name of an "
        f"offered tool ({', '.join(t.name for t in tools)})."
    )


# Models that cannot stop thinking, and the least they think (Google's documented
# minimum budget): ``think=False`` sends that, and a notice says so.
_ALWAYS_THINKS = (("gemini-2.5-pro", 128),)


def thinking_notice(think: bool | str | None, model: str) -> str | None:
    """The notice for ``think=False`` on a model that cannot stop thinking, else ``None``."""
    if think is not False:
        return None
    if _gemini_3(model):
        least = "its lowest thinking level (low)"
    else:
        budget = _least_budget(model)
        if budget is None:
            return None
        least = f"its smallest thinking budget ({budget} tokens)"
    return f"{model} cannot turn thinking off; it thinks with {least} instead."


def _least_budget(model: str) -> int | None:
    name = model.rpartition("/")[2]
    for prefix, budget in _ALWAYS_THINKS:
        if name.startswith(prefix):
            return budget
    return None


def _thinking(think: bool | str | None, model: str) -> dict[str, Any] | None:
    if think is None:
        return None
    newer = _gemini_3(model)
    if think is True:
        return {"includeThoughts": True}
    if think is False:
        # Gemini 3 cannot stop thinking; its lowest level is the nearest. Nor can
        # 2.5 Pro ("Budget 0 is invalid"): its smallest budget is.
        if newer:
            return {"thinkingLevel": "low"}
        return {"thinkingBudget": _least_budget(model) or 0}
    level = str(think).lower()
    if level not in _BUDGETS:
        raise InvalidRequestError(
            f"The thinking level {think!r} is not one Gemini takes: use "
            f"{', '.join(_BUDGETS)}, on or off."
        )
    if newer:
        return {"includeThoughts": True, "thinkingLevel": level}
    return {"includeThoughts": True, "thinkingBudget": _BUDGETS[level]}


def _response_format(value: object, json_schema: bool) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if value == "json":
        return {"responseMimeType": "application/json"}
    if isinstance(value, dict):
        try:
            schema = to_gemini_schema(value)
        except Unexpressible as exc:
            if not json_schema:
                raise InvalidRequestError(
                    f"The response schema cannot be written for Gemini: {exc.field} {exc.reason}."
                ) from None
            return {"responseMimeType": "application/json", "responseJsonSchema": value}
        return {"responseMimeType": "application/json", "responseSchema": schema}
    raise InvalidRequestError(
        f"response_format must be 'json' or a JSON Schema object, not {value!r}."
    )


def build_body(request: ProviderRequest, *, api_version: str) -> dict[str, Any]:
    """The ``generateContent`` body for ``request``."""
    json_schema = api_version != "v1"
    body: dict[str, Any] = {"contents": contents_of(request)}
    if not body["contents"]:
        raise InvalidRequestError(
            "The request has no message with content to send: Gemini needs at least one."
        )
    if request.system_prompt:
        body["systemInstruction"] = {"parts": [{"text": request.system_prompt}]}
    if request.tools:
        body["tools"] = tools_of(request.tools, json_schema=json_schema)
        config = _tool_config(request.tool_choice, request.tools)
        if config is not None:
            body["toolConfig"] = config
    options = request.options
    generation: dict[str, Any] = {}
    for key, value in options.extra.items():
        (body if key in _TOP_LEVEL else generation)[key] = value
    if options.temperature is not None:
        generation["temperature"] = option_number("temperature", options.temperature)
    if options.top_p is not None:
        generation["topP"] = option_number("top_p", options.top_p)
    if options.top_k is not None:
        generation["topK"] = option_number("top_k", options.top_k, integer=True)
    if options.seed is not None:
        generation["seed"] = option_number("seed", options.seed, integer=True)
    if options.max_tokens is not None:
        generation["maxOutputTokens"] = option_number(
            "max_tokens", options.max_tokens, integer=True
        )
    if options.stop is not None:
        items = stop_sequences(options.stop)
        if len(items) > MAX_STOP_SEQUENCES:
            raise InvalidRequestError(
                f"Gemini takes at most {MAX_STOP_SEQUENCES} stop sequences; "
                f"{len(items)} were given."
            )
        if items:
            generation["stopSequences"] = items
    generation.update(_response_format(request.response_format, json_schema))
    thinking = _thinking(request.think, request.model)
    if thinking is not None:
        generation["thinkingConfig"] = {**thinking, **generation.get("thinkingConfig", {})}
    if generation:
        body["generationConfig"] = generation
    return body
