"""Compaction's budget with a fixed part (system prompt, tools) that weighs, and the
latest question kept when a long tool loop is trimmed: bugs planted by hand that the
first tests let through (tests/plants.toml, module ``compaction``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pytest
from compactor_plugin import BIG, KeepLast, calling, fetch
from runtime_helpers import assert_history_valid, client, collect

import ollm
from ollm_testutils.mock import FunctionProvider, Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

WINDOW = 16_000


def _history(units: int) -> list[ollm.Message]:
    history = [ollm.Message.user("first")]
    for n in range(units):
        call = ollm.ToolCall(f"c{n}", "fetch", {"page": n})
        history += [
            ollm.Message.assistant("", tool_calls=(call,)),
            ollm.Message.tool(BIG, call=call),
        ]
    return history


def test_ollms_compactors_take_the_target_as_the_messages_budget() -> None:
    # The target is what the messages may use: the fixed part is counted apart. A fixed
    # part as large as the target must not make the compactor keep less.
    registries = ollm.discover(settings=ollm.PluginSettings(allow=frozenset({"compactors"})))
    history = _history(6)  # about 12,000 tokens

    def count(messages: Sequence[ollm.Message]) -> int:
        return sum(len(m.text) for m in messages) // 4

    for name in ("trim", "auto"):
        compactor = registries.compactors.specs()[name].factory()
        sent = compactor.compact(history, fixed_tokens=5000, target=5000, count=count)
        assert_history_valid(ollm.Conversation(sent))
        assert 3500 < count(sent) <= 5000, name


class Recording(KeepLast):
    """KeepLast, noting the budget it was given."""

    seen: ClassVar[list[tuple[int, int]]] = []

    def compact(
        self,
        messages: Sequence[ollm.Message],
        *,
        fixed_tokens: int,
        target: int,
        count: ollm.MessageCounter,
    ) -> list[ollm.Message]:
        Recording.seen.append((fixed_tokens, target))
        return super().compact(messages, fixed_tokens=fixed_tokens, target=target, count=count)


async def test_a_plugin_compactors_target_leaves_room_for_the_fixed_part(
    anyio_backend: str,
) -> None:
    registries = ollm.Registries()
    registries.compactors.register(ollm.CompactorSpec("recording", Recording))
    budgets = []
    for system in ("short", "s" * 8000):  # the second: 2,000 tokens more of fixed part
        Recording.seen = []
        provider = ScriptedProvider(*[calling(n) for n in range(8)], Reply("done"))
        chat_client = ollm.ChatClient(
            registries,
            provider=provider,
            tools=[fetch],
            context_window=WINDOW,
            compact="recording",
            system=system,
            max_turns=20,
        )
        events = await collect(chat_client.chat("read"))
        assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events
        assert Recording.seen
        budgets.append(Recording.seen[0])
    (fixed_short, target_short), (fixed_long, target_long) = budgets
    assert fixed_long - fixed_short > 1900
    # The whole request's target is the same: the messages get what the fixed part leaves.
    assert fixed_short + target_short == fixed_long + target_long


async def test_a_large_system_prompt_counts_toward_compacting(anyio_backend: str) -> None:
    # 2,000 tokens of results and 10,000 of system prompt pass 0.8 of a 14,000 window
    # only with the system prompt counted.
    provider = ScriptedProvider(calling(1), calling(2), Reply("done"))
    chat_client = client(
        provider,
        tools=[fetch],
        context_window=14_000,
        compact="clear-results",
        system="s" * 40_000,
        max_turns=5,
    )
    events = await collect(chat_client.chat("read two pages"))
    assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events
    assert [e.strategy for e in events if isinstance(e, ollm.CompactionEvent)] == ["clear-results"]
    for request in provider.requests:
        assert ollm.kit.fallback_count(request) <= 14_000


async def test_trim_keeps_the_latest_question_when_its_tool_loop_is_long(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider("Hello!", *[calling(n) for n in range(6)], Reply("done"))
    chat_client = client(provider, tools=[fetch], context_window=8000, compact="trim", max_turns=10)
    await collect(chat_client.chat("hi"))
    events = await collect(chat_client.chat("now read six pages"))
    assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events
    assert any(isinstance(e, ollm.CompactionEvent) for e in events)
    for request in provider.requests[1:]:
        texts = [m.text for m in request.messages]
        assert texts[0] == "hi"
        assert "now read six pages" in texts
        assert_history_valid(ollm.Conversation(request.messages))


async def test_summarize_trims_to_leave_room_for_its_summary(anyio_backend: str) -> None:
    # compact_at 0.8 of the window, down to 0.6 of it less a tenth for the summary.
    def reply(request: ollm.ProviderRequest) -> Reply:
        if request.system_prompt and "summarize" in request.system_prompt:
            return Reply("Questions were asked.")
        return Reply("ok " * 400)

    provider = FunctionProvider(reply)
    chat_client = client(provider, context_window=10_000, compact="summarize")
    compactions: list[ollm.CompactionEvent] = []
    for number in range(20):
        events = await collect(chat_client.chat(f"question {number}: " + "y" * 2000))
        assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events
        compactions += [e for e in events if isinstance(e, ollm.CompactionEvent)]
    assert compactions
    for compaction in compactions:
        assert compaction.tokens_after <= 5000 + 50, compaction  # 50: the summary itself
