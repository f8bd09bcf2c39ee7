"""Ollama's clients against ollm serve, with the fake Ollama server behind it (through
ollm-ollama): the official ``ollama`` client (chat, stream, tools, tags, show, embed),
and ollm's own ollm-ollama and ollm-openai pointed at ollm serve."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import ollama
import pytest

import ollm
from ollm_ollama import OllamaProvider
from ollm_openai import OpenAIProvider
from ollm_serve import ServeApp
from ollm_testutils import FakeOllamaServer, OllamaReply, OllamaToolCall

from .conftest import make_app

pytestmark = pytest.mark.anyio

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture
def fake() -> Iterator[FakeOllamaServer]:
    with FakeOllamaServer() as server:
        server.embed_as("", [0.5, 0.25])
        yield server


@pytest.fixture
def app(fake: FakeOllamaServer) -> ServeApp:
    registries = ollm.discover(plugins=[], entry_points=[])
    registries.providers.register(OllamaProvider(fake.url, environ={}))
    return make_app(registries, ("ollama",))


def client(app: ServeApp) -> ollama.AsyncClient:
    return ollama.AsyncClient(host="http://serve", transport=httpx.ASGITransport(app=app))


async def test_chat_not_streamed(app: ServeApp, fake: FakeOllamaServer) -> None:
    fake.script(OllamaReply(["Hello", " from Ollama"]))
    reply = await client(app).chat(
        model="llama3.2",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        options={"temperature": 0.1, "num_predict": 20, "seed": 3},
    )
    assert reply.message.content == "Hello from Ollama"
    assert reply.done
    assert reply.done_reason == "stop"
    sent = fake.chat_requests[0].json
    assert sent is not None
    assert sent["model"] == "llama3.2"
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert sent["options"]["temperature"] == 0.1
    assert sent["options"]["num_predict"] == 20


async def test_chat_streamed(app: ServeApp, fake: FakeOllamaServer) -> None:
    fake.script(OllamaReply(["one ", "two ", "three"]))
    parts = [
        part
        async for part in await client(app).chat(
            model="llama3.2", messages=[{"role": "user", "content": "Count"}], stream=True
        )
    ]
    assert "".join(p.message.content or "" for p in parts) == "one two three"
    assert parts[-1].done
    assert not any(p.done for p in parts[:-1])


async def test_tools_and_the_follow_up(app: ServeApp, fake: FakeOllamaServer) -> None:
    fake.script(
        OllamaReply(tool_calls=[OllamaToolCall("get_weather", {"city": "Oslo"})]),
        OllamaReply(["Cold in Oslo."]),
    )
    messages: list[object] = [{"role": "user", "content": "Weather in Oslo?"}]
    reply = await client(app).chat(model="llama3.2", messages=messages, tools=[WEATHER])
    calls = reply.message.tool_calls or []
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Oslo"})
    ]
    messages.append(reply.message)
    messages.append({"role": "tool", "content": "-3 C", "tool_name": "get_weather"})
    final = await client(app).chat(model="llama3.2", messages=messages, tools=[WEATHER])
    assert final.message.content == "Cold in Oslo."
    sent = fake.chat_requests[1].json
    assert sent is not None
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool"]


async def test_tags_show_embed_version(app: ServeApp) -> None:
    tags = await client(app).list()
    assert [m.model for m in tags.models] == ["llama3.2:latest"]
    shown = await client(app).show("llama3.2")
    assert "tools" in (shown.capabilities or [])
    embedded = await client(app).embed(model="llama3.2", input=["a", "b"])
    # The fake server's vector, as it normalises it: through ollm serve unchanged.
    assert len(embedded.embeddings) == 2
    assert list(embedded.embeddings[1][:2]) == pytest.approx([0.8944271909, 0.4472135954])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://serve"
    ) as http:
        version = (await http.get("/api/version")).json()["version"]
    assert version.count(".") == 2


async def test_an_unknown_model_is_ollamas_error(app: ServeApp, fake: FakeOllamaServer) -> None:
    with pytest.raises(ollama.ResponseError) as caught:
        await client(app).chat(model="nope", messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.status_code == 404
    assert "nope" in caught.value.error


@ollm.tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "Sunny" if city == "Paris" else "Rain"


@pytest.mark.parametrize("wire", ["ollama", "openai"])
async def test_ollms_own_providers_pointed_at_ollm_serve(
    app: ServeApp, fake: FakeOllamaServer, wire: str
) -> None:
    fake.script(
        OllamaReply(tool_calls=[OllamaToolCall("get_weather", {"city": "Paris"})]),
        OllamaReply(["Sunny in Paris."]),
    )
    transport = httpx.ASGITransport(app=app)
    provider: ollm.ProviderAdapter
    if wire == "ollama":
        provider = OllamaProvider("http://serve", transport=transport, environ={})
    else:
        provider = OpenAIProvider(
            "http://serve/v1", api_key="x", transport=transport, tools=True, environ={}
        )
    async with ollm.ChatClient(
        ollm.Registries(), provider=provider, model="llama3.2", tools=[get_weather]
    ) as chat:
        result = await chat.run("Weather in Paris?")
    assert result.text == "Sunny in Paris."
    assert [r.result for r in result.tool_results] == ["Sunny"]
    # The tool ran in this client; the server behind ollm serve read its result.
    sent = fake.chat_requests[1].json
    assert sent is not None
    assert sent["messages"][-1]["content"] == "Sunny"


async def test_format_a_json_schema_is_validated(app: ServeApp, fake: FakeOllamaServer) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    fake.script(OllamaReply(['{"town": "Oslo"}']), OllamaReply(['{"city": "Oslo"}']))
    reply = await client(app).chat(
        model="llama3.2", messages=[{"role": "user", "content": "Where?"}], format=schema
    )
    assert reply.message.content is not None
    assert json.loads(reply.message.content) == {"city": "Oslo"}
    # The first answer lacked "city": ollm asked again before the client saw anything.
    assert len(fake.chat_requests) == 2
