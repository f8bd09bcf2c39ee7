"""Models, capabilities, embeddings, health and token counting on an OpenAI-compatible server."""

from __future__ import annotations

import math

import pytest

import ollm
from ollm_openai import OpenAIProvider
from ollm_testutils import FakeOpenAIServer, OpenAIReply

from .conftest import MODEL, Stream, provider_events, request_for

pytestmark = pytest.mark.anyio


async def test_list_and_show(server: FakeOpenAIServer, provider: OpenAIProvider) -> None:
    server.models = ["zeta", "alpha"]
    models = await provider.list_models()
    assert [m.name for m in models] == ["alpha", "zeta"]
    assert (await provider.show_model("zeta")).name == "zeta"
    with pytest.raises(ollm.ModelNotFoundError, match="It has: zeta, alpha"):
        await provider.show_model("missing")
    assert isinstance(provider, ollm.ModelListing)
    assert not isinstance(provider, ollm.ModelManagement)


async def test_capabilities_from_configuration_and_the_server() -> None:
    async with FakeOpenAIServer(flavor="vllm") as server:
        server.max_model_len = 131072
        async with OpenAIProvider(server.base_url, tools=True, environ={}) as provider:
            caps = await provider.model_capabilities(MODEL)
        assert (caps.tools, caps.vision, caps.context_window) == (True, None, 131072)
        async with OpenAIProvider(server.base_url, context_window=4096, environ={}) as provider:
            assert (await provider.model_capabilities(MODEL)).context_window == 4096
    # A server that is down leaves the window unknown; it is not an error.
    async with OpenAIProvider("http://127.0.0.1:9/v1", environ={}) as provider:
        caps = await provider.model_capabilities(MODEL)
    assert caps.context_window is None


async def test_the_context_window_limits_the_chat() -> None:
    async with FakeOpenAIServer(flavor="vllm") as server:
        server.max_model_len = 50
        async with OpenAIProvider(server.base_url, model=MODEL, environ={}) as provider:
            client = ollm.ChatClient(ollm.Registries(), provider=provider)
            result = await client.run("word " * 400)
    assert not result.ok
    assert result.error is not None
    assert result.error.code == "TOKEN_LIMIT"
    assert server.chat_requests == []  # refused before anything was sent


async def test_embeddings_in_order_and_in_batches(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    provider.embed_batch_size = 3
    texts = [f"text {i}" for i in range(7)]
    result = await provider.embed("text-embedding-test", texts)
    assert len(result.vectors) == 7
    assert all(math.isclose(sum(v * v for v in vec), 1.0) for vec in result.vectors)
    # The server returns each batch in reverse order: the vectors follow the texts.
    single = await provider.embed("text-embedding-test", ["text 5"])
    assert single.vectors[0] == result.vectors[5]
    batches = [r.json["input"] for r in server.requests if r.path == "/v1/embeddings"]
    assert [len(b) for b in batches] == [3, 3, 1, 1]
    assert result.usage is not None
    assert result.usage.prompt_tokens > 0
    short = await provider.embed("text-embedding-test", ["a"], dimensions=4)
    assert len(short.vectors[0]) == 4
    with pytest.raises(ollm.OllmError, match="a list of texts"):
        await provider.embed("text-embedding-test", "one string")  # type: ignore[arg-type]
    with pytest.raises(ollm.ModelNotFoundError):
        await provider.embed("nope", ["a"])


async def test_health(server: FakeOpenAIServer, provider: OpenAIProvider) -> None:
    status = await provider.health()
    assert status.ok
    assert status.latency_ms is not None
    async with OpenAIProvider("http://127.0.0.1:9/v1", environ={}) as down:
        status = await down.health()
    assert not status.ok
    assert status.error_code == "CONNECTION_FAILED"


async def test_token_counts_anchor_on_the_servers_usage(
    server: FakeOpenAIServer, provider: OpenAIProvider
) -> None:
    server.script(OpenAIReply(["ok"], usage=(1000, 1)))
    request = request_for("hello")
    before = await provider.count_tokens(request)
    assert before == ollm.registries.fallback_count(request)
    await provider_events(provider, request)
    grown = ollm.ProviderRequest(
        model=MODEL,
        messages=(*request.messages, ollm.Message.assistant("ok"), ollm.Message.user("more")),
    )
    assert await provider.count_tokens(grown) == 1000 + 2  # "ok" and "more": 1 token each
    other = request_for("a different start")
    assert await provider.count_tokens(other) == ollm.registries.fallback_count(other)


async def test_usage_reaches_the_finish(server: FakeOpenAIServer, stream: Stream) -> None:
    server.script(OpenAIReply(["ok"], usage=(12, 3)))
    finish = (await stream())[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.usage == ollm.Usage(prompt_tokens=12, completion_tokens=3, total_tokens=15)


async def test_the_request_carries_every_option(server: FakeOpenAIServer) -> None:
    async with OpenAIProvider(server.base_url, environ={}, headers={"X-Team": "ml"}) as provider:
        image = ollm.ImagePart(b"\x89PNG....", "image/png")
        call = ollm.ToolCall("c1", "look", {"x": 1})
        request = ollm.ProviderRequest(
            model=MODEL,
            messages=(
                ollm.Message.user("what is this?", images=(image,)),
                ollm.Message.assistant("", tool_calls=(call,)),
                ollm.Message.tool("seen", call=call, images=(image,)),
            ),
            system_prompt="sys",
            tools=(ollm.ToolSchema("look", "Look.", {"type": "object", "properties": {}}),),
            tool_choice="look",
            options=ollm.GenerationOptions(
                temperature=0.2,
                top_p=0.9,
                top_k=40,
                repeat_penalty=1.1,
                seed=7,
                stop=("END",),
                max_tokens=64,
                extra={"min_p": 0.05},
            ),
            response_format={"title": "Answer", "type": "object"},
            think=False,
        )
        await provider_events(provider, request)
    sent = server.chat_requests[0]
    body = sent.json
    assert sent.headers["x-team"] == "ml"
    assert body["messages"][0] == {"role": "system", "content": "sys"}
    user = body["messages"][1]["content"]
    assert user[0] == {"type": "text", "text": "what is this?"}
    assert user[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assistant = body["messages"][2]
    assert assistant["content"] == ""  # a string: llama-cpp-python refuses null
    assert assistant["tool_calls"][0]["function"] == {"name": "look", "arguments": '{"x":1}'}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "seen"}
    # A tool message holds text only: its images follow in a user message.
    follow = body["messages"][4]
    assert follow["role"] == "user"
    assert follow["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert body["tool_choice"] == {"type": "function", "function": {"name": "look"}}
    expected = {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
        "repetition_penalty": 1.1,
        "seed": 7,
        "stop": ["END"],
        "max_tokens": 64,
        "min_p": 0.05,
    }
    assert {k: body[k] for k in expected} == expected
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Answer", "schema": {"title": "Answer", "type": "object"}},
    }
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


async def test_openai_itself_gets_only_what_it_accepts(httpx_mock: object) -> None:
    from pytest_httpx import HTTPXMock

    assert isinstance(httpx_mock, HTTPXMock)
    httpx_mock.add_response(
        stream=__import__("pytest_httpx").IteratorStream([b"data: [DONE]\n\n"]),
        headers={"content-type": "text/event-stream"},
    )
    async with OpenAIProvider(api_key="sk", http="httpx", environ={}) as provider:
        request = request_for(
            options=ollm.GenerationOptions(top_k=4, repeat_penalty=1.2, max_tokens=9),
            think="low",
            response_format="json",
        )
        await provider_events(provider, request)
    sent = httpx_mock.get_requests()[0]
    assert str(sent.url) == "https://api.openai.com/v1/chat/completions"
    import json

    body = json.loads(sent.content)
    assert "top_k" not in body
    assert "repetition_penalty" not in body
    assert body["max_completion_tokens"] == 9
    assert body["reasoning_effort"] == "low"
    assert body["response_format"] == {"type": "json_object"}
