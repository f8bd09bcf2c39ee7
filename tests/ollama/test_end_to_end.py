"""End to end: ChatClient + OllamaProvider against the fake Ollama server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import ollm
from ollm_ollama import OllamaProvider
from ollm_testutils import FakeOllamaServer, OllamaReply, OllamaToolCall

pytestmark = pytest.mark.anyio

TEMPERATURES = {"New York": 22, "Oslo": -3}


@ollm.tool
def get_temperature(city: str) -> str:
    """Get the current temperature for a city.

    Args:
        city: The name of the city.
    """
    return f"{TEMPERATURES[city]}°C"


@pytest.fixture
async def provider(fake_ollama: FakeOllamaServer, http_stack: str) -> AsyncIterator[OllamaProvider]:
    async with OllamaProvider(fake_ollama.url, http=http_stack, environ={}) as built:
        yield built


def _client(provider: OllamaProvider, **settings: object) -> ollm.ChatClient:
    settings.setdefault("model", "llama3.2")
    return ollm.ChatClient(ollm.Registries(), provider=provider, **settings)  # type: ignore[arg-type]


async def _run(client: ollm.ChatClient, prompt: str, **kwargs: object) -> list[ollm.ChatEvent]:
    async with client.chat(prompt, **kwargs) as stream:  # type: ignore[arg-type]
        return [event async for event in stream]


@pytest.mark.parametrize("placement", ["chunk", "final"])
async def test_a_tool_call_its_result_and_a_final_answer(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider, placement: str
) -> None:
    fake_ollama.script(
        OllamaReply(
            tool_calls=[OllamaToolCall("get_temperature", {"city": "New York"})],
            tool_calls_on=placement,  # type: ignore[arg-type]
        ),
        OllamaReply(["It is ", "22°C", " in New York."]),
    )
    client = _client(provider, tools=[get_temperature], system="Be brief.")
    events = await _run(client, "What is the temperature in New York?")

    starts = [e for e in events if isinstance(e, ollm.ToolCallStartEvent)]
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [(s.call.name, s.call.args) for s in starts] == [
        ("get_temperature", {"city": "New York"})
    ]
    assert [(r.result, r.is_error) for r in results] == [("22°C", False)]
    text = "".join(e.text for e in events if isinstance(e, ollm.TextEvent))
    assert text == "It is 22°C in New York."
    assert events[-1] == ollm.FinishEvent("stop", events[-1].usage)  # type: ignore[union-attr]
    assert not any(isinstance(e, ollm.ErrorEvent) for e in events)

    # The second request carries the call (arguments as an object) and its result.
    first, second = fake_ollama.chat_requests
    assert first.json["tools"][0]["function"]["name"] == "get_temperature"
    assert first.json["messages"][0] == {"role": "system", "content": "Be brief."}
    call_id = starts[0].call.id
    assistant, tool = second.json["messages"][2:4]
    assert assistant["tool_calls"] == [
        {"function": {"name": "get_temperature", "arguments": {"city": "New York"}}, "id": call_id}
    ]
    assert tool == {
        "role": "tool",
        "content": "22°C",
        "tool_name": "get_temperature",
        "tool_call_id": call_id,
    }
    # The history keeps the whole exchange for the next chat.
    roles = [m.role for m in client.conversation.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_the_first_reply_of_a_cold_model_is_announced(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    fake_ollama.script(OllamaReply("Hi"), OllamaReply("Again"))
    client = _client(provider)
    first = await _run(client, "hello")
    second = await _run(client, "hello again")
    notices = [e for e in first if isinstance(e, ollm.NoticeEvent)]
    assert [n.kind for n in notices] == ["loading_model"]
    assert not any(isinstance(e, ollm.NoticeEvent) for e in second)
    # The runtime's look at the model and the notice shared one look at /api/ps.
    assert len(fake_ollama.requests_to("/api/ps")) == 1
    assert len(fake_ollama.requests_to("/api/show")) == 1


async def test_thinking_and_usage_reach_the_caller(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    fake_ollama.add_model("qwen3", ["completion", "tools", "thinking"])
    fake_ollama.script(OllamaReply(["4"], thinking=["2+2", " is 4"]))
    client = _client(provider, model="qwen3")
    result = await client.run("2+2?", think=True)
    assert result.ok
    assert result.text == "4"
    assert result.messages[-1].thinking == "2+2 is 4"
    assert result.usage.prompt_tokens > 0
    assert fake_ollama.chat_requests[0].json["think"] is True


async def test_a_missing_model(fake_ollama: FakeOllamaServer, provider: OllamaProvider) -> None:
    events = await _run(_client(provider), "hi", model="llama9")
    error = events[-2]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "MODEL_NOT_FOUND"
    assert "ollm models pull llama9" in error.message
    assert events[-1] == ollm.FinishEvent("error", ollm.Usage())


async def test_a_model_without_tools(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    fake_ollama.add_model("gemma2", ["completion"])
    client = _client(provider, model="gemma2", tools=[get_temperature], tool_strategy="native")
    events = await _run(client, "temperature in Oslo?")
    error = events[-2]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "TOOLS_UNSUPPORTED"
    assert "does not support tools" in error.message
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "error"


async def test_an_error_line_in_the_middle_of_the_stream(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    fake_ollama.script(OllamaReply.midstream_error(["The", " sky"]))
    client = _client(provider)
    events = await _run(client, "why is the sky blue?")
    texts = [e.text for e in events if isinstance(e, ollm.TextEvent)]
    assert texts == ["The", " sky"]
    error = events[-2]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "PROVIDER_ERROR"
    assert "an error was encountered while running the model" in error.message
    # What streamed stays in the history, marked incomplete.
    assert client.conversation.messages[-1].incomplete


@pytest.mark.parametrize("end", ["close", "eof"])
async def test_a_stream_that_ends_before_done(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider, end: str
) -> None:
    fake_ollama.script(OllamaReply(["The"], end=end))  # type: ignore[arg-type]
    events = await _run(_client(provider), "hi")
    error = events[-2]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "STREAM_INTERRUPTED"


async def test_a_bad_line_from_the_server(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    fake_ollama.script(
        OllamaReply(["a", "b"], malformed="<html>proxy error</html>", malformed_at=1)
    )
    events = await _run(_client(provider), "hi")
    error = events[-2]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "BAD_RESPONSE"
    assert "<html>proxy error</html>" in error.message


async def test_aborting_a_chat_closes_the_connection(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    fake_ollama.script(OllamaReply.hanging(["Once", " upon"]))
    client = _client(provider)
    seen: list[ollm.ChatEvent] = []
    async with client.chat("a long story") as stream:
        async for event in stream:
            seen.append(event)
            if isinstance(event, ollm.TextEvent) and event.text == " upon":
                stream.abort()
    assert seen[-1] == ollm.FinishEvent("cancelled", ollm.Usage())
    request = fake_ollama.chat_requests[-1]
    assert await request.wait_async(10)
    assert request.disconnected
    assert client.conversation.messages[-1].incomplete


async def test_an_empty_403_through_the_real_server(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    fake_ollama.fail(403)
    request = ollm.ProviderRequest("llama3.2", (ollm.Message.user("hi"),))
    events = [e async for e in provider.chat_stream(request)]
    error = events[-1]
    assert isinstance(error, ollm.ErrorEvent)
    assert "Host header" in error.message


async def test_model_management_against_the_server(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    fake_ollama.add_model("qwen3:8b", ["completion", "tools", "thinking"], local=False)
    assert [m.name for m in await provider.list_models()] == ["llama3.2:latest"]

    steps = [step.status async for step in provider.stream_pull("qwen3:8b")]
    assert steps[0] == "pulling manifest"
    assert steps[-1] == "success"
    names = {m.name for m in await provider.list_models()}
    assert names == {"llama3.2:latest", "qwen3:8b"}

    info = await provider.show_model("qwen3:8b")
    assert info.capabilities is not None
    assert info.capabilities.thinking is True
    assert info.details["context_length"] == 131072

    await provider.copy_model("qwen3:8b", "qwen3-backup")
    await provider.delete_model("qwen3:8b")
    with pytest.raises(ollm.ModelNotFoundError):
        await provider.delete_model("qwen3:8b")
    names = {m.name for m in await provider.list_models()}
    assert names == {"llama3.2:latest", "qwen3-backup:latest"}

    assert await provider.version() == fake_ollama.version
    health = await provider.health()
    assert health.ok
    assert health.version == fake_ollama.version


async def test_running_models_and_the_context_window(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    fake_ollama.script(OllamaReply("hi"))
    request = ollm.ProviderRequest(
        "llama3.2",
        (ollm.Message.user("hi"),),
        options=ollm.GenerationOptions(context_window=8192),
    )
    [e async for e in provider.chat_stream(request)]
    (running,) = await provider.running_models()
    assert running.name.startswith("llama3.2")
    assert running.context_window == 8192
    capabilities = await provider.model_capabilities("llama3.2")
    assert capabilities.context_window == 8192
    assert capabilities.tools is True


async def test_embeddings_against_the_server(
    fake_ollama: FakeOllamaServer, provider: OllamaProvider
) -> None:
    fake_ollama.add_model("all-minilm", ["embedding"])
    texts = [f"text number {i}" for i in range(150)]
    result = await provider.embed("all-minilm", texts)
    assert len(result.vectors) == 150
    assert len(fake_ollama.requests_to("/api/embed")) == 2
    again = await provider.embed("all-minilm", texts[100:101])
    assert again.vectors[0] == result.vectors[100]  # same text, same vector, same place
