"""The Chat Completions wire as each engine writes it: replies, tool-call deltas, wordings.

What ``FakeOpenAIServer`` sends for a scripted ``OpenAIReply``, per ``flavor`` (see
``packages/ollm-openai/WIRE.md``): ids, the reasoning field, how tool calls are split
into deltas, where usage goes, and the words of the refusals ollm must recognise.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from ollm_testutils.fake_openai._script import AUTO, Flavor, OpenAIReply, OpenAIToolCall

__all__ = ["Frames", "context_message", "no_tools_message"]

# What each server says when tools are sent and it cannot parse tool calls.
_NO_TOOLS: dict[str, str] = {
    "vllm": (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    ),
    "sglang": "Tool calling is not supported: start the server with --tool-call-parser",
    "llamacpp": "tools param requires --jinja flag",
    "ollama": "registry.ollama.ai/library/{model}:latest does not support tools",
    "lmstudio": "This model does not support tools",
    "openai": "tools are not supported for this model",
    "litellm": "litellm.BadRequestError: tools are not supported for this model",
}


def context_message(flavor: str, window: int, used: int) -> tuple[str, str | None, str | None]:
    """(message, type, code) of a context-length refusal, as each server words it."""
    if flavor == "openai":
        return (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {used} tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            "context_length_exceeded",
        )
    if flavor == "llamacpp":
        return (
            f"request ({used} tokens) exceeds the available context size ({window} tokens), "
            "try increasing it",
            "exceed_context_size_error",
            None,
        )
    if flavor == "sglang":
        return (
            f"The input ({used} tokens) is longer than the model's context length "
            f"({window} tokens).",
            "BadRequestError",
            None,
        )
    return (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{used} tokens in the messages, Please reduce the length of the messages.",
        "BadRequestError",
        None,
    )


def no_tools_message(flavor: str, model: object) -> str:
    """What ``flavor`` answers when tools are sent and it cannot parse tool calls."""
    return _NO_TOOLS[flavor].format(model=model)


class Frames:
    """One engine's framing of replies."""

    def __init__(self, flavor: Flavor) -> None:
        self.flavor = flavor

    def call_id(self) -> str | None:
        """A new tool call's id, as the engine makes them (LM Studio sends none)."""
        if self.flavor == "lmstudio":
            return None
        if self.flavor == "vllm":
            return f"chatcmpl-tool-{secrets.token_hex(16)}"
        if self.flavor == "ollama":
            return f"call_{secrets.token_hex(4)}"
        return f"call_{secrets.token_hex(12)}"

    def usage(self, body: dict[str, Any], reply: OpenAIReply) -> dict[str, int]:
        """The reply's usage: scripted, or characters / 4 of the request and the text."""
        if reply.usage is not AUTO and reply.usage is not None:
            prompt, completion = reply.usage
        else:
            prompt = max(1, len(json.dumps(body.get("messages"))) // 4)
            completion = max(1, len("".join(reply.pieces)) // 4)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def finish_reason(self, reply: OpenAIReply) -> str | None:
        """``tool_calls`` when there are calls (``stop`` for LM Studio), else ``stop``."""
        if reply.finish_reason is not AUTO:
            return reply.finish_reason
        if reply.calls and self.flavor != "lmstudio":
            return "tool_calls"
        return "stop"

    @property
    def reasoning_field(self) -> str:
        """Where the engine puts reasoning."""
        return "reasoning" if self.flavor in ("ollama", "litellm") else "reasoning_content"

    def completion(self, body: dict[str, Any], reply: OpenAIReply, ident: str) -> dict[str, Any]:
        """The whole reply (``stream: false``)."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.pieces) or None}
        if reply.reasoning_pieces:
            message[self.reasoning_field] = "".join(reply.reasoning_pieces)
        if reply.calls:
            message["tool_calls"] = [
                {
                    "id": call.id if call.id is not AUTO else self.call_id(),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_text},
                }
                for call in reply.calls
            ]
        if reply.refusal:
            message["refusal"] = reply.refusal
        result: dict[str, Any] = {
            "id": ident,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": self.finish_reason(reply)}
            ],
        }
        if reply.usage is not None:
            result["usage"] = self.usage(body, reply)
        return result

    def tool_deltas(self, reply: OpenAIReply) -> list[list[dict[str, Any]]]:
        """The ``tool_calls`` of each delta that carries calls, framed as the engine does."""
        framing = reply.tool_call_framing or (
            "whole" if self.flavor in ("llamacpp", "lmstudio", "ollama") else "split"
        )
        calls = reply.calls
        ids = [call.id if call.id is not AUTO else self.call_id() for call in calls]

        def head(i: int, call: OpenAIToolCall, arguments: str) -> list[dict[str, Any]]:
            delta: dict[str, Any] = {
                "type": "function",
                "function": {"name": call.name, "arguments": arguments},
            }
            if self.flavor != "lmstudio":
                delta["index"] = i
            if ids[i] is not None:
                delta["id"] = ids[i]
            return [delta]

        if framing == "whole":
            return [head(i, call, call.arguments_text) for i, call in enumerate(calls)]
        pieces = [_split(call.arguments_text, 3) for call in calls]

        def piece(i: int, n: int) -> list[dict[str, Any]]:
            return [{"index": i, "function": {"arguments": pieces[i][n]}}]

        if framing == "interleaved":
            # Every call's head first, then their argument pieces alternating.
            deltas = [head(i, call, "") for i, call in enumerate(calls)]
            longest = max((len(p) for p in pieces), default=0)
            deltas += [
                piece(i, n) for n in range(longest) for i in range(len(calls)) if n < len(pieces[i])
            ]
            return deltas
        return [
            delta
            for i, call in enumerate(calls)
            for delta in [head(i, call, ""), *(piece(i, n) for n in range(len(pieces[i])))]
        ]

    def stream(
        self, body: dict[str, Any], reply: OpenAIReply, ident: str
    ) -> tuple[list[bytes], int]:
        """The reply's SSE events, and how many of them come before the tool calls."""
        created = int(time.time())
        model = body.get("model")

        def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
            choices = (
                []
                if delta is None
                else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            )
            value = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                **({"system_fingerprint": "fp_ollama"} if self.flavor == "ollama" else {}),
                "choices": choices,
                **extra,
            }
            return b"data: " + json.dumps(value).encode() + b"\n\n"

        events: list[bytes] = [chunk({"role": "assistant", "content": ""})]
        events.extend(chunk({self.reasoning_field: p}) for p in reply.reasoning_pieces)
        events.extend(chunk({"content": piece}) for piece in reply.pieces)
        if reply.refusal:
            events.append(chunk({"refusal": reply.refusal}))
        text_events = len(events)
        events.extend(chunk({"tool_calls": calls}) for calls in self.tool_deltas(reply))
        options = body.get("stream_options") or {}
        wants_usage = reply.usage is not None and (
            reply.usage is not AUTO
            or (isinstance(options, dict) and options.get("include_usage"))
            or self.flavor == "llamacpp"
        )
        finish = self.finish_reason(reply)
        if self.flavor == "llamacpp" and wants_usage:
            events.append(chunk({}, finish, usage=self.usage(body, reply)))
        else:
            if finish is not None:
                events.append(chunk({}, finish))
            if wants_usage:
                events.append(chunk(None, usage=self.usage(body, reply)))
        if reply.midstream_error is not None:
            events = events[:text_events]
            error = {"error": dict(reply.midstream_error)}
            events.append(b"data: " + json.dumps(error).encode() + b"\n\n")
        elif reply.end == "done":
            events.append(b"data: [DONE]\n\n")
        return events, text_events


def _split(text: str, parts: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]
