"""The mini provider against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import pytest
from ollm_example_http.provider import MiniProvider

import ollm
from ollm_http import RetryPolicy
from ollm_testutils import FakeOpenAIServer, OpenAIReply

pytestmark = pytest.mark.anyio


async def test_a_chat_streams_the_servers_text() -> None:
    async with FakeOpenAIServer() as server, MiniProvider(server.base_url) as provider:
        server.script(OpenAIReply(["Ahoy", ", matey"]))
        client = ollm.ChatClient(ollm.Registries(), provider=provider, model="gpt-test")
        result = await client.run("hello")
    assert result.text == "Ahoy, matey"
    assert server.chat_requests[0].json["messages"] == [{"role": "user", "content": "hello"}]


async def test_its_failures_are_ollms_errors() -> None:
    async with FakeOpenAIServer() as server, MiniProvider(server.base_url) as provider:
        provider.retry = RetryPolicy(backoff=0)
        server.script(*[OpenAIReply.failure(429, "slow down", retry_after=0)] * 3)
        result = await ollm.ChatClient(ollm.Registries(), provider=provider).run(
            "hi", model="gpt-test"
        )
        assert result.error is not None
        assert result.error.code == "RATE_LIMITED"
        assert len(server.chat_requests) == 3  # waited out twice, as the skeleton does
        server.script(OpenAIReply(["Hel"], end="cut"))
        result = await ollm.ChatClient(ollm.Registries(), provider=provider).run(
            "hi", model="gpt-test"
        )
        assert result.error is not None
        assert result.error.code == "STREAM_INTERRUPTED"
        assert result.text == "Hel"  # the partial reply is kept


async def test_a_missing_model_and_a_closed_port() -> None:
    async with FakeOpenAIServer() as server, MiniProvider(server.base_url) as provider:
        result = await ollm.ChatClient(ollm.Registries(), provider=provider).run("hi", model="x")
        assert result.error is not None
        assert result.error.code == "MODEL_NOT_FOUND"
    async with MiniProvider("http://127.0.0.1:1/v1") as provider:
        result = await ollm.ChatClient(ollm.Registries(), provider=provider).run(
            "hi", model="gpt-test"
        )
    assert result.error is not None
    assert result.error.code == "CONNECTION_FAILED"
