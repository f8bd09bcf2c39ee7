"""OpenAI-compatible details: usage details, vLLM's context wording, errors sent as SSE
events, images for models whose vision is unknown, base URLs that would misroute."""

from __future__ import annotations

import json

import pytest

import ollm
from ollm_openai import OpenAIConfig, OpenAIProvider
from ollm_testutils import FakeOpenAIServer, OpenAIReply

from .conftest import MODEL, Stream, error_of, provider_events, request_for, text_of

pytestmark = pytest.mark.anyio


def sse(*events: object, done: bool = True) -> bytes:
    """A body of ``data:`` events (objects as JSON, bytes as they are)."""
    lines = [e if isinstance(e, bytes) else f"data: {json.dumps(e)}\n\n".encode() for e in events]
    return b"".join(lines) + (b"data: [DONE]\n\n" if done else b"")


def chunk(content: str | None = None, finish: str | None = None) -> dict[str, object]:
    delta = {"content": content} if content is not None else {}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def test_cached_and_reasoning_tokens_are_kept(
    server: FakeOpenAIServer, stream: Stream
) -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 40,
        "total_tokens": 140,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 25},
    }
    server.script(
        OpenAIReply(raw=[sse(chunk("hi"), chunk(finish="stop"), {"choices": [], "usage": usage})])
    )
    finish = (await stream())[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.usage is not None
    assert (finish.usage.cached_tokens, finish.usage.reasoning_tokens) == (64, 25)
    assert (finish.usage.prompt_tokens, finish.usage.completion_tokens) == (100, 40)


VLLM_TOO_LONG = (
    "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens "
    "(The decoder prompt (length 9000) is longer than the maximum model length of 4096)."
)
DECODER_ONLY = "The decoder prompt (length 9000) is longer than the maximum model length of 4096."


@pytest.mark.parametrize("wording", [VLLM_TOO_LONG, DECODER_ONLY])
async def test_vllms_decoder_prompt_wording_is_context_exceeded(
    server: FakeOpenAIServer, stream: Stream, wording: str
) -> None:
    server.script(OpenAIReply.failure(400, wording, type="BadRequestError"))
    error = error_of(await stream())
    assert error.code == "CONTEXT_EXCEEDED"
    assert "too long" in error.message
    assert "(9000 tokens, for a window of 4096)" in error.message


async def test_vllms_decoder_prompt_wording_in_a_stream_is_context_exceeded(
    server: FakeOpenAIServer, stream: Stream
) -> None:
    error_event = {"error": {"message": DECODER_ONLY, "type": "BadRequestError", "code": 400}}
    server.script(OpenAIReply(raw=[sse(error_event, done=False)]))
    assert error_of(await stream()).code == "CONTEXT_EXCEEDED"


@pytest.mark.parametrize(
    "data",
    [
        b'{"message": "the engine died", "type": "internal"}',
        b'{"detail": "the engine died"}',
        b"the engine died",
    ],
)
async def test_an_error_event_without_an_error_key_gives_the_servers_words(
    server: FakeOpenAIServer, stream: Stream, data: bytes
) -> None:
    body = sse(chunk("Hel"), b"event: error\ndata: " + data + b"\n\n", done=False)
    server.script(OpenAIReply(raw=[body]))
    events = await stream()
    error = error_of(events)
    assert error.code != "STREAM_INTERRUPTED"
    assert "the engine died" in error.message
    assert text_of(events) == "Hel"


async def test_images_from_a_tool_go_to_a_model_whose_vision_is_unknown(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    # Nobody said whether the model sees: the image goes, and the server decides.
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 16

    @ollm.tool
    def snapshot() -> ollm.ToolResult:
        """Take a picture."""
        return ollm.ToolResult("the picture", images=(ollm.ImagePart(png, "image/png"),))

    server.script(OpenAIReply(tool_calls=[("snapshot", {})]), OpenAIReply("A black square."))
    client = ollm.ChatClient(ollm.Registries(), provider=provider, model=MODEL, tools=[snapshot])
    result = await client.run("What do you see?")
    assert result.text == "A black square.", result.error
    last = server.chat_requests[-1].json["messages"]
    parts = [p for m in last if isinstance(m["content"], list) for p in m["content"]]
    assert any(p["type"] == "image_url" for p in parts), last


async def test_a_model_said_to_be_blind_gets_a_note_instead(server: FakeOpenAIServer) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 16

    @ollm.tool
    def snapshot() -> ollm.ToolResult:
        """Take a picture."""
        return ollm.ToolResult("the picture", images=(ollm.ImagePart(png, "image/png"),))

    server.script(OpenAIReply(tool_calls=[("snapshot", {})]), OpenAIReply("ok"))
    async with OpenAIProvider(server.base_url, vision=False, environ={}) as provider:
        client = ollm.ChatClient(
            ollm.Registries(), provider=provider, model=MODEL, tools=[snapshot]
        )
        await client.run("What do you see?")
    body = json.dumps(server.chat_requests[-1].json)
    assert "image_url" not in body


@pytest.mark.parametrize("url", ["http://h:8000/v1?x=1", "http://h:8000/v1#frag", "http://h/v1?"])
def test_a_base_url_with_a_query_or_fragment_is_refused_in_words(url: str) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        OpenAIConfig.resolve(environ={"OPENAI_BASE_URL": url})
    assert "has a query or a fragment" in caught.value.message
    assert "OPENAI_BASE_URL" in caught.value.message


async def test_a_profile_named_provider_gives_its_own_name_in_hints(
    server: FakeOpenAIServer,
) -> None:
    server.script(
        OpenAIReply.failure(404, "The model `nope` does not exist.", code="model_not_found")
    )
    async with OpenAIProvider(server.base_url, environ={}) as provider:
        error = error_of(await provider_events(provider, request_for(model="nope")))
    assert error.code == "MODEL_NOT_FOUND"
    assert "ollm models list -p openai" in error.message
