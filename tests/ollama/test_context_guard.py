"""Ollama never cuts a prompt silently: "truncate": false, and a guard for servers that do."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import ollm
from ollm_ollama import OllamaProvider
from ollm_testutils import FakeOllamaServer

pytestmark = pytest.mark.anyio

# 9,000 tokens as ollm and the fake server count them (characters / 4).
LONG = "word " * 7200


@pytest.fixture
async def server() -> AsyncIterator[FakeOllamaServer]:
    async with FakeOllamaServer(models=False) as built:
        # A model trained for 4096 tokens: Ollama caps any num_ctx asked for there.
        built.add_model("small", capabilities=["completion", "tools"], context_length=4096)
        yield built


async def _chat(server: FakeOllamaServer, **settings: object) -> list[ollm.ChatEvent]:
    async with OllamaProvider(server.url, environ={}) as provider:
        client = ollm.ChatClient(
            ollm.Registries(),
            provider=provider,
            model="small",
            context_window=16384,
            **settings,  # type: ignore[arg-type]
        )
        async with client.chat(LONG) as stream:
            events = [event async for event in stream]
        assert client.conversation[0].text == LONG  # the history is whole, whatever happened
        return events


def _truncation_notice(events: list[ollm.ChatEvent]) -> str:
    """The message of the one notice besides the loading one: it must be context_truncated."""
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent) and e.kind != "loading_model"]
    assert [n.kind for n in notices] == ["context_truncated"]
    return notices[0].message


async def test_every_chat_request_says_truncate_false(server: FakeOllamaServer) -> None:
    async with OllamaProvider(server.url, environ={}) as provider:
        client = ollm.ChatClient(ollm.Registries(), provider=provider, model="small")
        await client.run("hi")
        await client.run("again")
    assert [r.json["truncate"] for r in server.chat_requests] == [False, False]


async def test_a_silently_cut_prompt_gives_a_notice_with_the_numbers(
    server: FakeOllamaServer,
) -> None:
    server.context_overflow = "truncate"
    events = await _chat(server)
    message = _truncation_notice(events)
    assert "evaluated 4096 tokens of about 9000 sent" in message
    assert "window of 4096 tokens" in message
    assert "trained for 4096 tokens" in message
    assert "16384" in message
    assert events[-1] == ollm.FinishEvent("stop", events[-1].usage)  # type: ignore[union-attr]
    assert server.evaluated == [4096]


async def test_on_truncation_error_ends_the_chat_context_exceeded(
    server: FakeOllamaServer,
) -> None:
    server.context_overflow = "truncate"
    events = await _chat(server, on_truncation="error")
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert [e.code for e in errors] == ["CONTEXT_EXCEEDED"]
    assert "evaluated 4096 tokens of about 9000 sent" in errors[0].message
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "error"


async def test_a_recent_server_refuses_and_the_chat_ends_context_exceeded(
    server: FakeOllamaServer,
) -> None:
    server.context_overflow = "refuse"
    events = await _chat(server)
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert [e.code for e in errors] == ["CONTEXT_EXCEEDED"]
    assert "(9010 tokens, for a window of 4096)" in errors[0].message
    assert not any(
        isinstance(e, ollm.NoticeEvent) and e.kind == "context_truncated" for e in events
    )


async def test_a_prompt_that_fits_gives_no_notice(server: FakeOllamaServer) -> None:
    server.context_overflow = "truncate"
    async with OllamaProvider(server.url, environ={}) as provider:
        client = ollm.ChatClient(
            ollm.Registries(), provider=provider, model="small", context_window=4096
        )
        events = [e async for e in client.chat("word " * 2000)]
    assert not any(
        isinstance(e, ollm.NoticeEvent) and e.kind == "context_truncated" for e in events
    )
    assert events[-1] == ollm.FinishEvent("stop", events[-1].usage)  # type: ignore[union-attr]


async def _cold_chat(server: FakeOllamaServer, **settings: object) -> list[ollm.ChatEvent]:
    """A first request to a model not loaded yet, with no window asked for: ollm knows no
    window when it builds the request (it assumes 4096), and the server loads the model
    with a window of 2048 (its trained length caps the default 4096)."""
    server.add_model("tiny", capabilities=["completion"], context_length=2048)
    server.context_overflow = "truncate"
    async with OllamaProvider(server.url, environ={}) as provider:
        client = ollm.ChatClient(ollm.Registries(), provider=provider, model="tiny", **settings)  # type: ignore[arg-type]
        prompt = "word " * 2400  # 3,000 tokens: under the 4096 assumed, over the 2048 used
        events = [e async for e in client.chat(prompt)]
        assert client.conversation[0].text == prompt
    assert server.evaluated == [2048]
    return events


async def test_a_cold_model_that_cut_the_prompt_gives_the_notice_on_the_first_request(
    server: FakeOllamaServer,
) -> None:
    events = await _cold_chat(server)
    message = _truncation_notice(events)
    assert "evaluated 2048 tokens of about 3000 sent, in a window of 2048" in message
    assert events[-1] == ollm.FinishEvent("stop", events[-1].usage)  # type: ignore[union-attr]


async def test_a_cold_model_that_cut_the_prompt_ends_context_exceeded_on_error(
    server: FakeOllamaServer,
) -> None:
    events = await _cold_chat(server, on_truncation="error")
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert [e.code for e in errors] == ["CONTEXT_EXCEEDED"]
    assert "evaluated 2048 tokens of about 3000 sent" in errors[0].message
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "error"


async def test_a_prompt_past_the_trained_length_is_caught_when_the_server_cannot_say(
    server: FakeOllamaServer,
) -> None:
    server.fail(500, "no", path="/api/ps")  # which window was loaded is never known
    events = await _cold_chat(server)
    message = _truncation_notice(events)
    assert "evaluated 2048 tokens of about 3000 sent, in a window of 2048" in message
    assert "tiny's trained length, the longest window Ollama gives it" in message


async def test_a_cold_model_whose_prompt_fits_gives_no_notice(server: FakeOllamaServer) -> None:
    server.add_model("tiny", capabilities=["completion"], context_length=2048)
    server.context_overflow = "truncate"
    async with OllamaProvider(server.url, environ={}) as provider:
        client = ollm.ChatClient(ollm.Registries(), provider=provider, model="tiny")
        events = [e async for e in client.chat("word " * 1000)]
    assert not any(
        isinstance(e, ollm.NoticeEvent) and e.kind == "context_truncated" for e in events
    )
    assert server.evaluated == [1260]  # the fake counts 10 tokens more a message


def test_on_truncation_takes_notice_or_error() -> None:
    with pytest.raises(ValueError, match='"notice" or "error"'):
        ollm.ChatClient(ollm.Registries(), on_truncation="stop")


@ollm.tool
def read_page(page: int) -> str:
    """Read one page of a long document."""
    return f"page {page}: " + "text " * 1600  # 2,000 tokens


async def test_thirty_turns_of_long_tool_results_fit_a_4096_window(
    server: FakeOllamaServer,
) -> None:
    from ollm_testutils import OllamaReply, OllamaToolCall

    server.context_overflow = "refuse"  # a request past the window would be an error
    for page in range(30):
        server.script(
            OllamaReply(tool_calls=[OllamaToolCall("read_page", {"page": page})]),
            OllamaReply(f"Page {page} read."),
        )
    async with OllamaProvider(server.url, environ={}) as provider:
        client = ollm.ChatClient(
            ollm.Registries(),
            provider=provider,
            model="small",
            tools=[read_page],
            context_window=4096,
            compact="auto",
        )
        compactions = 0
        for page in range(30):
            events = [e async for e in client.chat(f"Read page {page}.")]
            assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events
            compactions += sum(isinstance(e, ollm.CompactionEvent) for e in events)
    assert len(server.chat_requests) == 60
    assert all(tokens <= 4096 for tokens in server.evaluated)
    assert compactions > 0
    results = [m for m in client.conversation if m.role == "tool"]
    assert len(results) == 30  # the conversation keeps every result whole
    assert all(len(m.text) > 8000 for m in results)
