"""Compaction: a request leaves out of a long conversation what it must to fit the window;
the conversation keeps everything."""

from __future__ import annotations

from typing import Any

import pytest
from compactor_plugin import BIG, calling, fetch
from hypothesis import given
from hypothesis import strategies as st
from runtime_helpers import assert_history_valid, client, collect

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


def text_of(request: ollm.ProviderRequest) -> str:
    return " ".join(m.text for m in request.messages)


def tokens_of(request: ollm.ProviderRequest) -> int:
    return ollm.kit.fallback_count(request)


async def _chat(chat_client: ollm.ChatClient, prompt: str) -> list[ollm.ChatEvent]:
    return await collect(chat_client.chat(prompt))


async def test_old_tool_results_are_elided_from_requests_not_from_the_conversation(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(calling(1), calling(2), calling(3), Reply("done"))
    chat_client = client(
        provider, tools=[fetch], context_window=4096, compact="clear-results", max_turns=10
    )
    events = await _chat(chat_client, "read three pages")
    compactions = [e for e in events if isinstance(e, ollm.CompactionEvent)]
    assert compactions
    assert all(c.strategy == "clear-results" for c in compactions)
    assert all(c.tokens_after < c.tokens_before for c in compactions)
    assert events[-1] == ollm.FinishEvent("stop", events[-1].usage)  # type: ignore[union-attr]
    last = provider.requests[-1]
    assert "[result of fetch elided: 2000 tokens]" in text_of(last)
    assert text_of(last).count(BIG) == 1  # the latest result is whole
    assert tokens_of(last) <= 4096
    # The conversation keeps every result whole.
    results = [m for m in chat_client.conversation if m.role == "tool"]
    assert [m.text for m in results] == [BIG] * 3
    for request in provider.requests:
        assert_history_valid(ollm.Conversation(request.messages))


async def test_trim_drops_whole_turns_and_keeps_the_first_and_latest_question(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(*[Reply("ok " * 400) for _ in range(12)])
    chat_client = client(provider, context_window=4096, compact="trim")
    for number in range(12):
        events = await _chat(chat_client, f"question {number}: " + "y" * 2000)
        assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events
    last = provider.requests[-1]
    assert last.messages[0].text.startswith("question 0:")
    assert last.messages[-1].text.startswith("question 11:")
    assert tokens_of(last) <= 4096
    assert len(last.messages) < 24
    assert len(chat_client.conversation) == 24  # the conversation has every message
    assert_history_valid(ollm.Conversation(last.messages))


async def test_off_ends_the_chat_token_limit_as_before(anyio_backend: str) -> None:
    provider = ScriptedProvider(calling(1), calling(2), calling(3), Reply("done"))
    chat_client = client(provider, tools=[fetch], context_window=4096, compact="off")
    events = await _chat(chat_client, "read three pages")
    assert [e.code for e in events if isinstance(e, ollm.ErrorEvent)] == ["TOKEN_LIMIT"]
    assert not any(isinstance(e, ollm.CompactionEvent) for e in events)


def too_long() -> Reply:
    return Reply(error=ollm.ErrorEvent("request (9000 tokens) exceeds...", "CONTEXT_EXCEEDED"))


async def test_a_refusal_as_too_long_is_compacted_once_and_sent_again(anyio_backend: str) -> None:
    provider = ScriptedProvider(calling(1), calling(2), too_long(), Reply("done"))
    chat_client = client(provider, tools=[fetch], context_window=100_000, compact="auto")
    events = await _chat(chat_client, "read")
    assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events
    assert any(isinstance(e, ollm.CompactionEvent) for e in events)
    refused, again = provider.requests[2], provider.requests[3]
    assert tokens_of(again) < tokens_of(refused)


async def test_refused_again_after_compacting_stays_context_exceeded(anyio_backend: str) -> None:
    provider = ScriptedProvider(calling(1), calling(2), too_long(), too_long(), Reply("never"))
    chat_client = client(provider, tools=[fetch], context_window=100_000, compact="auto")
    events = await _chat(chat_client, "read")
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    # The server's refusal, not TOKEN_LIMIT (which says nothing was sent).
    assert [e.code for e in errors] == ["CONTEXT_EXCEEDED"]
    assert "still too long after compacting" in errors[0].message
    assert events[-1] == ollm.FinishEvent("error", events[-1].usage)  # type: ignore[union-attr]
    assert len(provider.requests) == 4  # no loop
    assert_history_valid(chat_client.conversation)


async def test_a_refused_request_compacting_cannot_shorten_is_not_sent_again(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(too_long(), Reply("never"))
    chat_client = client(provider, context_window=100_000, compact="auto")
    events = await _chat(chat_client, "one long question")
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert [e.code for e in errors] == ["CONTEXT_EXCEEDED"]
    assert "so the request was not sent again" in errors[0].message
    assert errors[0].message.startswith("request (9000 tokens) exceeds")
    assert events[-1] == ollm.FinishEvent("error", events[-1].usage)  # type: ignore[union-attr]
    assert len(provider.requests) == 1
    assert not any(isinstance(e, ollm.CompactionEvent) for e in events)
    assert chat_client.conversation.messages == (ollm.Message.user("one long question"),)
    # The conversation goes on: the next request is sent.
    assert not [e for e in await _chat(chat_client, "short") if isinstance(e, ollm.ErrorEvent)]
    assert len(provider.requests) == 2


@pytest.mark.parametrize(
    ("setting", "value"), [("compact", "summarize:"), ("compact", " trim"), ("compact_at", 1.5)]
)
def test_settings_are_checked(setting: str, value: Any) -> None:
    with pytest.raises(ValueError, match=setting):
        ollm.ChatClient(ollm.Registries(), **{setting: value})


# -- any history, any strategy, any budget ------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[ollm.Message]:
    """Turn groups: a question, rounds of parallel calls with results of any size, an
    answer (or none: the next question follows the last results)."""
    history: list[ollm.Message] = []
    for group in range(draw(st.integers(0, 6))):
        history.append(ollm.Message.user(f"q{group} " + "u" * draw(st.integers(0, 3000))))
        for round_ in range(draw(st.integers(0, 3))):
            calls = [
                ollm.ToolCall(f"c{group}_{round_}_{n}", "fetch", {"page": n})
                for n in range(draw(st.integers(1, 3)))
            ]
            history.append(ollm.Message.assistant("", tool_calls=calls))
            for call in calls:
                history.append(ollm.Message.tool("r" * draw(st.integers(0, 6000)), call=call))
        if draw(st.booleans()):
            history.append(ollm.Message.assistant("a" * draw(st.integers(0, 2000))))
    return history


@given(
    history=histories(),
    strategy=st.sampled_from(["auto", "clear-results", "trim"]),
    budget=st.integers(64, 16384),
)
async def test_the_view_sent_is_valid_and_fits_or_the_chat_ends_token_limit(
    anyio_backend: str, history: list[ollm.Message], strategy: str, budget: int
) -> None:
    provider = ScriptedProvider("answer")
    chat_client = client(
        provider,
        conversation=ollm.Conversation(history),
        context_window=budget,
        compact=strategy,
    )
    events = await collect(chat_client.chat("the question"))
    question = ollm.Message.user("the question")
    smallest = ollm.ProviderRequest("m", (*history[:1], question))
    if strategy != "clear-results" and tokens_of(smallest) + 8 <= 0.6 * budget:
        # Trimming can always come down to the first message and the question.
        assert provider.requests, events
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    if provider.requests:
        (sent,) = provider.requests
        assert_history_valid(ollm.Conversation(sent.messages))
        assert tokens_of(sent) <= budget
        assert sent.messages[-1] == ollm.Message.user("the question")
        assert finish.reason == "stop"
    else:
        assert [e.code for e in events if isinstance(e, ollm.ErrorEvent)] == ["TOKEN_LIMIT"]
        assert finish.reason == "token_limit"
    # The conversation keeps every message, whatever was sent.
    assert chat_client.conversation.messages[: len(history)] == tuple(history)


@given(
    history=histories(),
    cut=st.integers(0, 40),
    system=st.none() | st.text(max_size=50),
)
def test_the_incremental_count_is_the_fallback_count(
    history: list[ollm.Message], cut: int, system: str | None
) -> None:
    from ollm.registries.tokens import IncrementalCount

    counted = IncrementalCount()
    grown: list[ollm.Message] = []
    for message in history:  # a conversation that grows, counted at each step
        grown.append(message)
        request = ollm.ProviderRequest("m", tuple(grown), system, ())
        assert counted(request) == ollm.kit.fallback_count(request)
    # A list that changed otherwise (a view cut from the front) is counted again.
    request = ollm.ProviderRequest("m", tuple(history[cut:]), system, ())
    assert counted(request) == ollm.kit.fallback_count(request)


@given(
    history=histories(),
    strategy=st.sampled_from(["auto", "clear-results", "trim"]),
    window=st.integers(256, 8192),
)
def test_the_views_own_count_is_the_count_of_what_it_sends(
    history: list[ollm.Message], strategy: str, window: int
) -> None:
    from ollm.runtime.compaction import Compaction, ContextView

    compaction = Compaction(ContextView(), strategy, 0.8)
    grown: list[ollm.Message] = []
    for index, message in enumerate(history):  # the view decided as the history grows
        grown.append(message)
        following = history[index + 1] if index + 1 < len(history) else None
        if message.tool_calls or (following is not None and following.role == "tool"):
            continue  # requests go when all the results are in
        request = ollm.ProviderRequest("m", tuple(grown), "Be brief.", ())
        sent, _ = compaction.apply(request, window)
        assert compaction.count(sent) == ollm.kit.fallback_count(sent)
        if sent is not request:
            assert_history_valid(ollm.Conversation(sent.messages))


async def test_summarize_makes_one_summary_request_per_compaction(anyio_backend: str) -> None:
    def reply(request: ollm.ProviderRequest) -> Reply:
        if request.system_prompt and "summarize" in request.system_prompt:
            return Reply("They talked about questions 0 to N.")
        return Reply("ok " * 400)

    from ollm_testutils.mock import FunctionProvider

    provider = FunctionProvider(reply)
    chat_client = client(provider, context_window=4096, compact="summarize:tiny")
    compactions = 0
    for number in range(10):
        events = await _chat(chat_client, f"question {number}: " + "y" * 2000)
        assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events
        compactions += sum(isinstance(e, ollm.CompactionEvent) for e in events)
    summaries = [r for r in provider.requests if r.model == "tiny"]
    assert compactions > 0
    assert len(summaries) == compactions
    last = [r for r in provider.requests if r.model != "tiny"][-1]
    assert any(m.text.startswith("[Summary of the") for m in last.messages)
    assert "They talked about" in text_of(last)
    assert tokens_of(last) <= 4096
    assert_history_valid(ollm.Conversation(last.messages))
    assert len(chat_client.conversation) == 20


async def test_compact_next_compacts_the_next_request_whatever_its_size(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(*[Reply("ok " * 400) for _ in range(5)])
    chat_client = client(provider, context_window=100_000)  # compaction off, a big window
    for number in range(3):
        await _chat(chat_client, f"question {number}: " + "y" * 2000)
    chat_client.compact_next()
    events = await _chat(chat_client, "question 3")
    (compaction,) = [e for e in events if isinstance(e, ollm.CompactionEvent)]
    assert compaction.tokens_after <= compaction.tokens_before // 2 + 10
    before, after = provider.requests[2], provider.requests[3]
    assert len(after.messages) < len(before.messages)
    # Once only: with compaction off, the request after it sends everything again.
    events = await _chat(chat_client, "question 4")
    assert not any(isinstance(e, ollm.CompactionEvent) for e in events)
    assert len(provider.requests[4].messages) == 9
    assert len(chat_client.conversation) == 10
