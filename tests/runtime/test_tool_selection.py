"""select-tools: with many tools offered, each request carries only the ones that matter."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from runtime_helpers import assert_one_finish_last, client, collect

import ollm
from ollm.middleware import ToolSelection
from ollm.middleware.tool_selection import lexical_scores
from ollm_http import RetryPolicy
from ollm_ollama import OllamaProvider
from ollm_testutils import FakeOllamaServer, OllamaReply
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

TOPICS = [
    "calendar event", "email message", "spreadsheet cell", "database row", "image file",
    "audio clip", "video frame", "invoice total", "shipping label", "user account",
]  # fmt: skip


def _tools() -> list[ollm.Tool]:
    """120 tools: 119 about other things, and one that fetches the weather."""

    def noop(**kwargs: Any) -> str:
        return "done"

    tools = [
        ollm.Tool.from_schema(
            ollm.ToolSchema(
                f"{verb}_{topic.replace(' ', '_')}_{n}",
                f"{verb.capitalize()} a {topic} in the workspace.",
                {"type": "object", "properties": {"id": {"type": "string"}}},
            ),
            noop,
        )
        for n, (verb, topic) in enumerate(
            (verb, topic)
            for verb in ("create", "delete", "list", "update", "archive", "copy")
            for topic in TOPICS * 2
        )
    ][:119]
    weather = ollm.Tool.from_schema(
        ollm.ToolSchema(
            "get_forecast",
            "Get the weather forecast (temperature, rain, wind) for a city.",
            {"type": "object", "properties": {"city": {"type": "string"}}},
        ),
        lambda city: "sunny",
    )
    return [*tools[:60], weather, *tools[60:]]


async def test_each_request_carries_at_most_n_tools_with_the_relevant_one(
    anyio_backend: str,
) -> None:
    tools = _tools()
    assert len(tools) == 120
    other = tools[-1].name  # irrelevant, but called: kept from then on
    provider = ScriptedProvider(
        Reply(tool_calls=[("get_forecast", {"city": "Oslo"})]),
        Reply(tool_calls=[(other, {"id": "x"})]),
        Reply("Sunny in Oslo."),
    )
    chat_client = client(provider, tools=tools, middleware=[ToolSelection(16)], max_turns=5)
    events = await collect(chat_client.chat("What is the weather forecast in Oslo? Will it rain?"))
    assert_one_finish_last(events, "stop")
    for request in provider.requests:
        names = [tool.name for tool in request.tools]
        assert len(names) <= 16
        assert "get_forecast" in names  # relevant, then already called
    # Tools called in this chat stay offered.
    assert other not in [t.name for t in provider.requests[0].tools]
    assert other in [t.name for t in provider.requests[2].tools]


async def test_the_always_list_is_kept(anyio_backend: str) -> None:
    provider = ScriptedProvider("ok")
    tools = _tools()
    selection = ToolSelection(4, always=[tools[-1].name])
    await collect(client(provider, tools=tools, middleware=[selection]).chat("weather?"))
    names = [t.name for t in provider.requests[0].tools]
    assert len(names) == 4
    assert tools[-1].name in names
    assert "get_forecast" in names


async def test_few_tools_are_sent_as_they_are(anyio_backend: str) -> None:
    provider = ScriptedProvider("ok")
    few = _tools()[:10]
    await collect(client(provider, tools=few, middleware=[ToolSelection(16)]).chat("hi"))
    assert [t.name for t in provider.requests[0].tools] == [t.name for t in few]


def test_max_tools_is_checked() -> None:
    with pytest.raises(ValueError, match="max_tools"):
        ToolSelection(0)


# -- ranked by embeddings ----------------------------------------------------------------------

EMBED = "nomic-embed-text"
QUESTION = "Do I need an umbrella tomorrow in Oslo?"
WARNING = "could not rank the tools by"


def _with_planted() -> list[ollm.Tool]:
    """The 120 tools with, at index 60, one that shares no word with ``QUESTION``."""
    tools = [t for t in _tools() if t.name != "get_forecast"]
    meteo = ollm.Tool.from_schema(
        ollm.ToolSchema(
            "meteo_lookup",
            "Atmospheric outlook for a place.",
            {"type": "object", "properties": {"place": {"type": "string"}}},
        ),
        lambda place: "showers",
    )
    return [*tools[:60], meteo, *tools[60:]]


@pytest.fixture
async def server() -> AsyncIterator[FakeOllamaServer]:
    async with FakeOllamaServer() as built:
        built.add_model(EMBED, capabilities=["embedding"])
        # The question and the planted tool mean the same thing: the same vector.
        built.embed_as("umbrella", [1.0]).embed_as("meteo_lookup", [1.0])
        yield built


def _sent(server: FakeOllamaServer) -> list[list[str]]:
    return [[t["function"]["name"] for t in r.json["tools"]] for r in server.chat_requests]


def _embedded(server: FakeOllamaServer) -> list[int]:
    """How many texts each /api/embed request carried."""
    return [len(r.json["input"]) for r in server.requests_to("/api/embed")]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if WARNING in r.getMessage()]


async def test_embeddings_find_a_tool_sharing_no_word_and_embed_the_tools_once(
    anyio_backend: str, server: FakeOllamaServer, caplog: pytest.LogCaptureFixture
) -> None:
    tools = _with_planted()
    assert len(tools) == 120
    # By shared words the planted tool is nowhere: it scores nothing.
    assert lexical_scores(QUESTION, [t.schema for t in tools])[60] == 0.0
    server.script(
        OllamaReply(tool_calls=[(tools[0].name, {"id": "x"})]),
        OllamaReply(tool_calls=[(tools[1].name, {"id": "y"})]),
        OllamaReply(["Take one."]),
    )
    selection = ToolSelection(16, embed_model=EMBED)
    async with OllamaProvider(server.url, environ={}) as provider:
        chat_client = client(
            provider, model="llama3.2", tools=tools, middleware=[selection], max_turns=5
        )
        events = await collect(chat_client.chat(QUESTION))
        assert_one_finish_last(events, "stop")
        # A second chat on the same middleware: the tools are not embedded again.
        server.script(OllamaReply(["Yes."]))
        assert_one_finish_last(
            await collect(chat_client.chat("And an umbrella the day after?")), "stop"
        )
    sent = _sent(server)
    assert len(sent) == 4
    for names in sent:
        assert len(names) <= 16
        assert "meteo_lookup" in names
    # 120 tool texts once, then one query a request.
    assert sum(_embedded(server)) == 120 + len(sent)
    assert _embedded(server)[-1] == 1
    assert not _warnings(caplog)


async def test_without_embeddings_the_chat_goes_on_by_shared_words(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """ScriptedProvider has no ``embed``: lexical ranking, one warning for the chat."""
    provider = ScriptedProvider(Reply(tool_calls=[("get_forecast", {"city": "Oslo"})]), "Sunny.")
    selection = ToolSelection(16, embed_model=EMBED)
    with caplog.at_level(logging.WARNING):
        chat_client = client(provider, tools=_tools(), middleware=[selection], max_turns=5)
        events = await collect(chat_client.chat("What is the weather forecast in Oslo?"))
    assert_one_finish_last(events, "stop")
    assert len(provider.requests) == 2
    for request in provider.requests:
        names = [t.name for t in request.tools]
        assert len(names) <= 16
        assert "get_forecast" in names
    (warning,) = _warnings(caplog)
    assert "has no embeddings" in warning
    assert "ollm pull nomic-embed-text" in warning


@pytest.mark.parametrize("fault", ["missing model", "server error"])
async def test_a_failing_embed_falls_back_to_shared_words_warned_once_a_chat(
    anyio_backend: str, server: FakeOllamaServer, caplog: pytest.LogCaptureFixture, fault: str
) -> None:
    if fault == "missing model":
        server.remove_model(EMBED)
    else:
        server.fail(500, "embedding runner crashed", path="/api/embed")
    tools = _tools()
    server.script(
        OllamaReply(tool_calls=[("get_forecast", {"city": "Oslo"})]), OllamaReply(["Sunny."])
    )
    selection = ToolSelection(16, embed_model=EMBED)
    with caplog.at_level(logging.WARNING):
        async with OllamaProvider(server.url, retry=RetryPolicy(backoff=0), environ={}) as provider:
            chat_client = client(
                provider, model="llama3.2", tools=tools, middleware=[selection], max_turns=5
            )
            events = await collect(chat_client.chat("What is the weather forecast in Oslo?"))
            assert_one_finish_last(events, "stop")
            assert len(_warnings(caplog)) == 1  # two requests, one warning
            server.script(OllamaReply(["Dry."]))
            await collect(chat_client.chat("And tomorrow?"))
    assert len(_warnings(caplog)) == 2  # the next chat says it again
    sent = _sent(server)
    assert len(sent) == 3
    assert all(len(names) <= 16 and "get_forecast" in names for names in sent)


class _Embedding(ScriptedProvider):
    """A scripted provider whose ``embed`` answers too few vectors, or waits forever."""

    def __init__(self, *replies: Any, hang: bool = False) -> None:
        super().__init__(*replies)
        self.hang = hang
        self.embedding = anyio.Event()

    async def embed(self, model: str, texts: Sequence[str]) -> ollm.EmbeddingResult:
        self.embedding.set()
        if self.hang:
            await anyio.sleep_forever()
        return ollm.EmbeddingResult(model, [[1.0]])


async def test_a_wrong_number_of_vectors_falls_back(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    provider = _Embedding("Sunny.")
    with caplog.at_level(logging.WARNING):
        chat_client = client(
            provider, tools=_tools(), middleware=[ToolSelection(16, embed_model=EMBED)]
        )
        events = await collect(chat_client.chat("What is the weather forecast in Oslo?"))
    assert_one_finish_last(events, "stop")
    assert "get_forecast" in [t.name for t in provider.requests[0].tools]
    (warning,) = _warnings(caplog)
    assert "gave 1 vectors for 121 texts" in warning


async def test_abort_while_embedding_ends_the_chat_cancelled(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    provider = _Embedding("never sent", hang=True)
    chat_client = client(
        provider, tools=_tools(), middleware=[ToolSelection(16, embed_model=EMBED)]
    )
    stream = chat_client.chat("What is the weather forecast in Oslo?")
    events: list[ollm.ChatEvent] = []

    async def read() -> None:
        events.extend(await collect(stream))
        provider.embedding.set()  # a chat that never embedded does not leave the test waiting

    async with anyio.create_task_group() as group:
        group.start_soon(read)
        await provider.embedding.wait()
        stream.abort()
    assert_one_finish_last(events, "cancelled")
    assert not provider.requests
    assert not _warnings(caplog)
