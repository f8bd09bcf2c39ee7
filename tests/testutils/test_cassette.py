"""Cassettes: record a provider's traffic through a fake upstream, replay it with the
upstream stopped, through the production provider code over real HTTP."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

import ollm
from ollm_anthropic import AnthropicProvider
from ollm_gemini import GeminiProvider
from ollm_ollama import OllamaProvider
from ollm_openai import OpenAIProvider
from ollm_testutils import (
    AnthropicReply,
    FakeAnthropicServer,
    FakeGeminiServer,
    FakeOllamaServer,
    FakeOpenAIServer,
    GeminiReply,
    OllamaReply,
    OllamaToolCall,
    OpenAIReply,
    Reply,
    ScriptedProvider,
)
from ollm_testutils.cassette import Cassette, CassetteMiss, Wire, get_wire, register_wire
from ollm_testutils.httpserver import FakeServer

pytestmark = pytest.mark.anyio

# An address where nothing listens: a replay that reached its upstream would fail.
NOWHERE = "http://127.0.0.1:9"


def get_weather(city: str) -> str:
    """Get the weather of a city.

    Args:
        city: The city.
    """
    return f"Sunny in {city}"


def started(wire: str) -> tuple[FakeServer, str]:
    """A fake upstream of ``wire`` scripted for a tool round, and its base URL."""
    if wire == "ollama":
        ollama = FakeOllamaServer()
        ollama.script(
            OllamaReply(tool_calls=[("get_weather", {"city": "Paris"})]),
            OllamaReply(["It is ", "sunny ☀ in Paris."]),
        )
        return ollama.start(), ollama.url
    if wire == "openai":
        openai = FakeOpenAIServer(models=["gpt-test"])
        openai.script(
            OpenAIReply(tool_calls=[("get_weather", {"city": "Paris"})]),
            OpenAIReply(["It is ", "sunny ☀ in Paris."]),
        )
        return openai.start(), f"{openai.url}/v1"
    if wire == "anthropic":
        anthropic = FakeAnthropicServer()
        anthropic.script(
            AnthropicReply(tool_uses=[("get_weather", {"city": "Paris"})]),
            AnthropicReply(["It is ", "sunny ☀ in Paris."]),
        )
        return anthropic.start(), anthropic.url
    gemini = FakeGeminiServer()
    gemini.script(
        GeminiReply(calls=[("get_weather", {"city": "Paris"})]),
        GeminiReply(["It is ", "sunny ☀ in Paris."]),
    )
    return gemini.start(), gemini.url


PROVIDERS: dict[str, Callable[[str], ollm.ProviderAdapter]] = {
    "ollama": lambda url: OllamaProvider(host=url),
    "openai": lambda url: OpenAIProvider(url, api_key="sk-test"),
    "gemini": lambda url: GeminiProvider("test-key", base_url=url),
    "anthropic": lambda url: AnthropicProvider("test-key", base_url=url),
}
MODELS = {
    "ollama": "llama3.2",
    "openai": "gpt-test",
    "gemini": "gemini-2.5-flash",
    "anthropic": "claude-sonnet-4-6",
}


async def chat(cassette: Cassette, wire: str, upstream: str, prompt: str) -> list[Any]:
    provider = PROVIDERS[wire](cassette.url(upstream, wire=wire))
    client = ollm.ChatClient(provider=provider, model=MODELS[wire], tools=[get_weather])
    async with client.chat(prompt) as stream:
        return [event async for event in stream]


def stable(events: list[Any]) -> list[Any]:
    """The events without what the clock decides (timings); all else must be equal."""
    timed = {"usage", "duration_ms"}
    ids: dict[str, str] = {}

    def numbered(value: Any) -> Any:
        # A call's id that the client made up (Gemini sends none) is new each run.
        if isinstance(value, dict):
            return {
                k: ids.setdefault(v, f"id-{len(ids)}") if k == "id" else numbered(v)
                for k, v in value.items()
                if k not in timed
            }
        if isinstance(value, list):
            return [numbered(v) for v in value]
        return value

    return [numbered(msgspec.to_builtins(event)) for event in events]


def chat_episodes(path: Path) -> list[dict[str, Any]]:
    episodes = json.loads(path.read_text())["episodes"]
    return [
        e
        for e in episodes
        if any(
            word in e["request"]["path"].lower() for word in ("chat", "generatecontent", "messages")
        )
    ]


@pytest.mark.parametrize("wire", ["ollama", "openai", "gemini", "anthropic"])
async def test_a_tool_round_replays_with_the_upstream_stopped(tmp_path: Path, wire: str) -> None:
    path = tmp_path / "chat.json"
    upstream_server, upstream = started(wire)
    with upstream_server, Cassette(path, mode="all") as cassette:
        recorded = await chat(cassette, wire, upstream, "Weather in Paris?")
    assert [e.result for e in recorded if isinstance(e, ollm.ToolCallResultEvent)] == [
        "Sunny in Paris"
    ]
    assert "".join(e.text for e in recorded if isinstance(e, ollm.TextEvent)).endswith("Paris.")
    # Two chat requests in order: the second carries the tool's result.
    chats = chat_episodes(path)
    assert len(chats) == 2
    assert "Sunny in Paris" in json.dumps(chats[1]["request"])

    with Cassette(path, mode="none") as replay:
        replayed = await chat(replay, wire, upstream, "Weather in Paris?")
    replay.check()
    assert stable(replayed) == stable(recorded)


async def one_chat(provider: ollm.ProviderAdapter, model: str, prompt: str) -> list[Any]:
    request = ollm.ProviderRequest(model=model, messages=(ollm.Message.user(prompt),))
    return [event async for event in provider.chat_stream(request)]


async def test_a_changed_prompt_is_a_miss_with_the_diff_and_the_command(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    with FakeOllamaServer() as upstream, Cassette(path, mode="all") as cassette:
        upstream.script(OllamaReply("Blue, because of Rayleigh scattering."))
        await one_chat(
            OllamaProvider(host=cassette.url(upstream.url, wire="ollama")),
            "llama3.2",
            "Why is the sky blue?",
        )
    rerecord = "pytest --ollm-record=new_episodes tests/test_sky.py::test_sky"
    with Cassette(path, mode="none", rerecord=rerecord) as replay:
        provider = OllamaProvider(host=replay.url(NOWHERE, wire="ollama"))
        events = await one_chat(provider, "llama3.2", "Why is the sea blue?")
    # The provider saw a failure at once (no retry), never the other recording's answer.
    (error,) = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert "no recording" in error.message
    with pytest.raises(CassetteMiss) as raised:
        replay.check()
    report = str(raised.value)
    assert '-        "content": "Why is the sky blue?",' in report
    assert '+        "content": "Why is the sea blue?",' in report
    assert report.count("no recording of this request") == 1
    assert report.endswith(rerecord)
    assert "ollama POST /api/chat" in report


async def test_no_file_is_a_miss_that_says_so(tmp_path: Path) -> None:
    with Cassette(tmp_path / "none.json") as replay:
        await one_chat(OllamaProvider(host=replay.url(NOWHERE, wire="ollama")), "llama3.2", "hi")
    assert "(no such file yet)" in replay.report()
    assert "no recording of this kind" in replay.report()
    assert not (tmp_path / "none.json").exists()


async def test_new_episodes_keeps_the_recorded_and_adds_the_new(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    with FakeOllamaServer() as upstream:
        upstream.reply_with(lambda body: OllamaReply(f"Re: {body['messages'][-1]['content']}"))
        with Cassette(path, mode="all") as first:
            await one_chat(
                OllamaProvider(host=first.url(upstream.url, wire="ollama")), "llama3.2", "one"
            )
        with Cassette(path, mode="new_episodes") as second:
            provider = OllamaProvider(host=second.url(upstream.url, wire="ollama"))
            await one_chat(provider, "llama3.2", "one")
            await one_chat(provider, "llama3.2", "two")
        # "one" was replayed, not asked again.
        assert [r.json["messages"][-1]["content"] for r in upstream.chat_requests] == ["one", "two"]
        assert len(chat_episodes(path)) == 2
        with Cassette(path, mode="all") as third:
            await one_chat(
                OllamaProvider(host=third.url(upstream.url, wire="ollama")), "llama3.2", "three"
            )
    assert [e["request"]["body"]["messages"][-1]["content"] for e in chat_episodes(path)] == [
        "three"
    ]


async def test_a_repeated_request_replays_its_recordings_in_order(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    with FakeOllamaServer() as upstream, Cassette(path, mode="all") as cassette:
        upstream.script(OllamaReply("first"), OllamaReply("second"))
        provider = OllamaProvider(host=cassette.url(upstream.url, wire="ollama"))
        for _ in range(2):
            await one_chat(provider, "llama3.2", "again")
    with Cassette(path) as replay:
        provider = OllamaProvider(host=replay.url(NOWHERE, wire="ollama"))
        texts = [
            "".join(
                e.text
                for e in await one_chat(provider, "llama3.2", "again")
                if isinstance(e, ollm.TextEvent)
            )
            for _ in range(3)
        ]
    # Then the last one again, rather than a miss.
    assert texts == ["first", "second", "second"]


async def raw_chunks(url: str, body: dict[str, Any]) -> list[bytes]:
    """The body's HTTP chunks as a client reads them (one ``iter_raw`` piece a chunk)."""
    async with (
        httpx.AsyncClient(timeout=10) as client,
        client.stream("POST", url, json=body) as response,
    ):
        return [piece async for piece in response.aiter_raw()]


async def test_a_character_cut_between_frames_replays_cut(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    with FakeOllamaServer() as upstream, Cassette(path, mode="all") as cassette:
        # Three bytes an HTTP chunk: each sun (three bytes in UTF-8) is cut somewhere.
        upstream.script(OllamaReply(["It is ☀☀ sunny"], write_size=3))
        provider = OllamaProvider(host=cassette.url(upstream.url, wire="ollama"))
        recorded = await one_chat(provider, "llama3.2", "Sun?")
    (episode,) = chat_episodes(path)
    frames = [
        base64.b64decode(f["base64"]) if isinstance(f, dict) else f.encode()
        for f in episode["reply"]["frames"]
    ]
    assert any(isinstance(f, dict) for f in episode["reply"]["frames"])  # half a character
    assert all(len(frame) <= 3 for frame in frames)
    with Cassette(path) as replay:
        url = replay.url(NOWHERE, wire="ollama")
        # The same request as the provider's: the chunks a client reads are the frames.
        chunks = await raw_chunks(f"{url}/api/chat", episode["request"]["body"])
        replayed = await one_chat(OllamaProvider(host=url), "llama3.2", "Sun?")
    replay.check()
    assert chunks == frames
    assert stable(replayed) == stable(recorded)
    assert "".join(e.text for e in replayed if isinstance(e, ollm.TextEvent)) == "It is ☀☀ sunny"


async def test_tool_call_deltas_replay_as_they_were_split(tmp_path: Path) -> None:
    path = tmp_path / "deltas.json"
    with FakeOpenAIServer(models=["gpt-test"]) as upstream, Cassette(path, mode="all") as cassette:
        upstream.script(
            OpenAIReply(tool_calls=[("get_weather", {"city": "Paris"})], tool_call_framing="split")
        )
        provider = OpenAIProvider(cassette.url(upstream.base_url, wire="openai"), api_key="k")
        request = ollm.ProviderRequest(
            model="gpt-test", messages=(ollm.Message.user("Weather?"),), tool_call_deltas=True
        )
        recorded = [e async for e in provider.chat_stream(request)]
    with Cassette(path) as replay:
        provider = OpenAIProvider(replay.url(f"{NOWHERE}/v1", wire="openai"), api_key="k")
        replayed = [e async for e in provider.chat_stream(request)]
    replay.check()
    deltas = [e for e in replayed if isinstance(e, ollm.ToolCallDeltaEvent)]
    assert len(deltas) > 1  # the arguments came in pieces, as recorded
    assert stable(replayed) == stable(recorded)


async def test_embeddings_and_model_listing_replay(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    with FakeOllamaServer() as upstream, Cassette(path, mode="all") as cassette:
        provider = OllamaProvider(host=cassette.url(upstream.url, wire="ollama"))
        models = await provider.list_models()
        vectors = (await provider.embed("llama3.2", ["a cat", "a dog"])).vectors
    with Cassette(path) as replay:
        provider = OllamaProvider(host=replay.url(NOWHERE, wire="ollama"))
        assert await provider.list_models() == models
        assert (await provider.embed("llama3.2", ["a cat", "a dog"])).vectors == vectors
        with pytest.raises(ollm.OllmError, match="no recording of this request"):
            await provider.embed("llama3.2", ["a bird"])
    assert '+      "a bird"' in replay.report()


async def test_an_in_process_provider_replays_its_events(tmp_path: Path) -> None:
    path = tmp_path / "local.json"
    built: list[ScriptedProvider] = []

    def factory() -> ScriptedProvider:
        provider = ScriptedProvider(name="local")
        provider.add(Reply(["Hel", "lo"], thinking="hm"))
        built.append(provider)
        return provider

    async def chat(provider: ollm.ProviderAdapter, prompt: str) -> list[Any]:
        # Through a client: its requests carry an abort signal and a conversation id.
        client = ollm.ChatClient(ollm.Registries(), provider=provider, model="m")
        async with client.chat(prompt) as stream:
            return [event async for event in stream]

    with Cassette(path, mode="all") as cassette:
        recorded = await chat(cassette.provider(factory, name="local"), "hi")
        again = await one_chat(cassette.provider(factory, name="local"), "m", "hi")
    with Cassette(path) as replay:
        replayed = await chat(replay.provider(factory, name="local"), "hi")
        missed = await one_chat(replay.provider(factory, name="local"), "m", "bye")
    assert len(built) == 2  # replaying never built the real provider
    assert stable(replayed) == stable(recorded)
    assert [e.text for e in replayed if isinstance(e, ollm.TextEvent)] == ["Hel", "lo"]
    assert [e.text for e in again if isinstance(e, ollm.TextEvent)] == ["Hel", "lo"]
    assert [type(e).__name__ for e in missed] == ["ErrorEvent", "FinishEvent"]
    changed = [line for line in replay.report().splitlines() if line.startswith(("+", "-"))][2:]
    assert [line.replace(" ", "") for line in changed] == ['-"text":"hi",', '+"text":"bye",']


async def test_a_wire_registered_later_records_and_replays(tmp_path: Path) -> None:
    # As the Anthropic fake will: a name, its fake server, its error body.
    def error_body(status: int, message: str) -> bytes:
        return json.dumps(
            {"type": "error", "error": {"type": "api_error", "message": message}}
        ).encode()

    register_wire(Wire("ollama-too", FakeOllamaServer, error_body), replace=True)
    assert get_wire("ollama-too").error_body(501, "x").startswith(b'{"type": "error"')
    path = tmp_path / "later.json"
    with FakeOllamaServer() as upstream, Cassette(path, mode="all") as cassette:
        upstream.script(OllamaReply("later"))
        recorded = await one_chat(
            OllamaProvider(host=cassette.url(upstream.url, wire="ollama-too")), "llama3.2", "hi"
        )
    with Cassette(path) as replay:
        replayed = await one_chat(
            OllamaProvider(host=replay.url(NOWHERE, wire="ollama-too")), "llama3.2", "hi"
        )
    assert stable(replayed) == stable(recorded)
    with pytest.raises(ValueError, match=r"No cassette wire is named 'nope'\. Known: .*gemini"):
        Cassette(tmp_path / "x.json").url(NOWHERE, wire="nope")


async def test_ids_the_client_makes_up_are_numbered_in_the_key(tmp_path: Path) -> None:
    # An older Ollama sends calls without ids: ollm makes them up, new on every run, and
    # sends them back with the results; the key numbers them, so the replay matches.
    path = tmp_path / "ids.json"
    call = OllamaToolCall("get_weather", {"city": "Paris"}, id=None, index=None)

    async def tool_round(cassette: Cassette, upstream: str) -> list[Any]:
        provider = OllamaProvider(host=cassette.url(upstream, wire="ollama"))
        client = ollm.ChatClient(provider=provider, model="llama3.2", tools=[get_weather])
        async with client.chat("Weather?") as stream:
            return [event async for event in stream]

    with FakeOllamaServer() as upstream, Cassette(path, mode="all") as cassette:
        upstream.script(OllamaReply(tool_calls=[call]), OllamaReply("Sunny."))
        recorded = await tool_round(cassette, upstream.url)
    second = chat_episodes(path)[1]["request"]["body"]["messages"]
    assert second[1]["tool_calls"][0]["id"] == "<id-1>"
    assert second[2]["tool_call_id"] == "<id-1>"
    with Cassette(path) as replay:
        replayed = await tool_round(replay, NOWHERE)
    replay.check()
    assert stable(replayed) == stable(recorded)


async def test_a_reply_cut_by_the_upstream_replays_cut(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    with FakeOllamaServer() as upstream, Cassette(path, mode="all") as cassette:
        upstream.script(OllamaReply.disconnect())
        recorded = await one_chat(
            OllamaProvider(host=cassette.url(upstream.url, wire="ollama")), "llama3.2", "hi"
        )
    assert chat_episodes(path)[0]["reply"]["cut"] is True
    with Cassette(path) as replay:
        replayed = await one_chat(
            OllamaProvider(host=replay.url(NOWHERE, wire="ollama")), "llama3.2", "hi"
        )
    replay.check()
    assert [e.code for e in replayed if isinstance(e, ollm.ErrorEvent)] == ["STREAM_INTERRUPTED"]
    # The same events but the error's words, which name the server's address.
    assert [e for e in stable(replayed) if e["type"] != "error"] == [
        e for e in stable(recorded) if e["type"] != "error"
    ]
