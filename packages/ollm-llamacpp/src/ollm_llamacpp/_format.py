"""A request as the text a model reads: its own chat template, or a plain transcript.

A GGUF file may carry its chat template (Jinja, ``tokenizer.chat_template``); it is
rendered as llama-cpp-python renders it (its ``Jinja2ChatFormatter``: a sandbox, the
``raise_exception`` and ``strftime_now`` helpers, the tools when the template takes
them). A model without one (a base model) gets a plain transcript, which such models
continue well, with stop strings that end the reply where the model would start the
next turn::

    You are terse.

    User: What is 2+2?
    Assistant: 2+2 = 4
    User: And 3+3?
    Assistant:

(llama-cpp-python's own fallback, the ``llama-2`` format, makes a base model repeat
the prompt.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ollm.types import Message, ProviderRequest, ToolSchema
from ollm_llamacpp._errors import LlamaCppErrorCode, model_error

__all__ = [
    "TRANSCRIPT_STOPS",
    "Prompt",
    "supports_tools",
    "template_prompt",
    "transcript_prompt",
]

_LABELS = {"user": "User", "assistant": "Assistant", "tool": "Tool", "system": "System"}
TRANSCRIPT_STOPS = ("\nUser:", "\nAssistant:", "\nSystem:", "\nTool:")
"""Where a reply in the plain transcript ends: where the model begins another turn."""


@dataclass(frozen=True)
class Prompt:
    """The text to tokenize, how (``special``: control tokens written in it count;
    ``add_bos``: put the start token first), the stop strings of the format, and
    whether the reply's leading blanks are dropped (``lstrip``)."""

    text: str
    stops: tuple[str, ...]
    special: bool
    add_bos: bool
    lstrip: bool = False


def supports_tools(template: str | None) -> bool:
    """Whether a chat template renders tool definitions (it reads ``tools``)."""
    return template is not None and "tools" in template


def transcript_prompt(request: ProviderRequest) -> Prompt:
    """The plain ``User:`` / ``Assistant:`` transcript of ``request``, ending with the
    ``Assistant:`` the model continues."""
    lines: list[str] = []
    if request.system_prompt:
        lines.append(request.system_prompt.strip() + "\n")
    for message in request.messages:
        label = _LABELS.get(message.role, message.role.capitalize())
        text = _text_with_calls(message)
        if message.role == "tool" and message.name:
            label = f"Tool ({message.name})"
        lines.append(f"{label}: {text.strip()}")
    lines.append("Assistant:")
    stops = (*TRANSCRIPT_STOPS, *(request.options.stop or ()))
    return Prompt("\n".join(lines), stops, special=False, add_bos=True, lstrip=True)


def _text_with_calls(message: Message) -> str:
    text = message.text
    for call in message.tool_calls:
        text += f"\n[{call.name}({json.dumps(call.args, ensure_ascii=False)})]"
    return text


def template_prompt(
    template: str, request: ProviderRequest, *, bos: str, eos: str, model: str
) -> Prompt:
    """``request`` rendered by the model's chat template (an ``OllmError`` naming
    ``model`` when the template refuses it).

    A template that refuses a system message gets it at the top of the first user
    message instead.
    """
    from jinja2 import TemplateError
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    formatter: Any = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
    tools = _tools(request.tools) if request.tools and supports_tools(template) else None
    messages = _messages(request)
    try:
        try:
            text = formatter(messages=messages, tools=tools).prompt
        except (TemplateError, ValueError, TypeError):
            if not request.system_prompt:
                raise
            text = formatter(messages=_system_folded(messages), tools=tools).prompt
    except (TemplateError, ValueError, TypeError) as exc:
        raise model_error(
            f"The chat template of {model} cannot render this conversation ({exc}). Chat "
            "with another model, or start a new conversation.",
            LlamaCppErrorCode.TEMPLATE_FAILED,
            model=model,
        ) from None
    stops = tuple(request.options.stop or ())
    return Prompt(text, stops, special=True, add_bos=False)


def _messages(request: ProviderRequest) -> list[dict[str, Any]]:
    """The conversation in the shape chat templates expect (OpenAI's, as Hugging Face
    templates read it: a call's arguments as an object)."""
    out: list[dict[str, Any]] = []
    if request.system_prompt:
        out.append({"role": "system", "content": request.system_prompt})
    for message in request.messages:
        item: dict[str, Any] = {"role": message.role, "content": message.text}
        if message.tool_calls:
            item["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.args},
                }
                for call in message.tool_calls
            ]
        if message.role == "tool":
            item["tool_call_id"] = message.tool_call_id
            if message.name:
                item["name"] = message.name
        out.append(item)
    return out


def _system_folded(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    system = messages[0]["content"]
    rest = [dict(m) for m in messages[1:]]
    for message in rest:
        if message["role"] == "user":
            message["content"] = f"{system}\n\n{message['content']}"
            return rest
    return [{"role": "user", "content": system}, *rest]


def _tools(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]
