"""Compactors from plugins (``ollm_compactors``): a chat names one, the runtime sends
what it returns, checks it first, and keeps the conversation whole whatever it does."""

from __future__ import annotations

import pytest
from compactor_plugin import BIG, Broken, KeepLast, Orphan, calling, fetch
from runtime_helpers import assert_history_valid, collect

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


class Counting(KeepLast):
    def __init__(self) -> None:
        self.calls = 0

    def compact(self, messages, *, fixed_tokens, target, count):  # type: ignore[no-untyped-def]
        self.calls += 1
        return super().compact(messages, fixed_tokens=fixed_tokens, target=target, count=count)


def with_compactors(**compactors: type) -> ollm.Registries:
    registries = ollm.Registries()
    for name, kind in compactors.items():
        registries.compactors.register(ollm.CompactorSpec(name.replace("_", "-"), kind))
    return registries


def client(registries: ollm.Registries, provider: ollm.ProviderAdapter, **kw: object):  # type: ignore[no-untyped-def]
    return ollm.ChatClient(registries, provider=provider, tools=[fetch], **kw)  # type: ignore[arg-type]


async def test_a_plugin_compactor_decides_what_is_sent_and_the_conversation_keeps_all(
    anyio_backend: str,
) -> None:
    made: list[Counting] = []

    def build() -> Counting:
        made.append(Counting())
        return made[-1]

    registries = ollm.Registries()
    registries.compactors.register(ollm.CompactorSpec("keep-last", build))
    replies = [calling(n) for n in range(16)] + [Reply("done")]
    provider = ScriptedProvider(*replies)
    chat_client = client(
        registries, provider, context_window=16384, compact="keep-last", max_turns=20
    )
    events = await collect(chat_client.chat("read sixteen pages"))
    assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events
    compactions = [e for e in events if isinstance(e, ollm.CompactionEvent)]
    assert compactions
    assert all(c.strategy == "keep-last" for c in compactions)
    assert all(c.tokens_after < c.tokens_before for c in compactions)
    assert all(c.removed > 0 for c in compactions)
    for request in provider.requests:
        assert ollm.kit.fallback_count(request) <= 16384
        assert_history_valid(ollm.Conversation(request.messages))
    assert provider.requests[-1].messages[0].text == "read sixteen pages"
    assert len(provider.requests[-1].messages) < len(chat_client.conversation)
    assert [m.text for m in chat_client.conversation if m.role == "tool"] == [BIG] * 16
    # One compactor for the chat, called only when what it sent last (and what came
    # since) passed compact_at again: not before every request.
    assert len(made) == 1
    assert made[0].calls == len(compactions)
    first = 7  # the first request past compact_at: 6 results of 2,000 tokens, and a call
    assert len(compactions) <= (len(provider.requests) - first) // 2 + 1


async def test_a_compactor_that_leaves_an_orphan_result_is_refused_before_sending(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(calling(1), calling(2), Reply("ok"))
    registries = with_compactors(orphan=Orphan)
    chat_client = client(registries, provider, context_window=4096, compact="orphan")
    events = await collect(chat_client.chat("read"))
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert [e.code for e in errors] == ["INVALID_HISTORY"], events
    assert "compactor" in errors[0].message
    assert events[-1].reason == "error"  # type: ignore[union-attr]
    sent = len(provider.requests)
    for request in provider.requests:  # the invalid one never went
        assert_history_valid(ollm.Conversation(request.messages))
    # The conversation is whole and valid; another strategy goes on with it.
    assert_history_valid(chat_client.conversation)
    events = await collect(chat_client.chat(compact="auto"))
    assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events
    assert len(provider.requests) == sent + 1
    assert provider.requests[-1].messages[-1].role == "tool"


async def test_a_compactor_that_raises_ends_the_chat_plugin_error_history_intact(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(*[calling(n) for n in range(4)], Reply("ok"))
    registries = with_compactors(broken=Broken)
    chat_client = client(registries, provider, context_window=4096, compact="broken")
    events = await collect(chat_client.chat("read"))
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert [e.code for e in errors] == ["PLUGIN_ERROR"], events
    message = errors[0].message
    assert "Compactor 'broken' failed: RuntimeError: the compactor broke" in message
    assert "the conversation is intact" in message
    assert events[-1].reason == "error"  # type: ignore[union-attr]
    conversation = chat_client.conversation
    assert [m.text for m in conversation if m.role == "tool"] == [BIG] * len(provider.requests)
    assert_history_valid(conversation)
    events = await collect(chat_client.chat(compact="auto"))
    assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events


async def test_an_unknown_compactor_is_an_error_listing_the_installed_ones(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(Reply("never"))
    registries = with_compactors(keep_last=KeepLast)
    chat_client = client(registries, provider, compact="keep-lats")
    events = await collect(chat_client.chat("hi"))
    (error,) = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "PLUGIN_ERROR"
    assert error.message == (
        "Compactor 'keep-lats' is not installed. Available: auto, off, clear-results, "
        "trim, summarize, summarize:MODEL, keep-last."
    )
    assert provider.requests == []


async def test_a_refusal_as_too_long_asks_the_plugin_compactor_for_half(
    anyio_backend: str,
) -> None:
    too_long = Reply(error=ollm.ErrorEvent("request too long", "CONTEXT_EXCEEDED"))
    provider = ScriptedProvider(calling(1), calling(2), too_long, Reply("done"))
    registries = with_compactors(keep_last=KeepLast)
    chat_client = client(registries, provider, context_window=100_000, compact="keep-last")
    events = await collect(chat_client.chat("read"))
    assert not any(isinstance(e, ollm.ErrorEvent) for e in events), events
    (compaction,) = [e for e in events if isinstance(e, ollm.CompactionEvent)]
    assert compaction.strategy == "keep-last"
    refused, again = provider.requests[2], provider.requests[3]
    assert ollm.kit.fallback_count(again) < ollm.kit.fallback_count(refused)
    assert_history_valid(ollm.Conversation(again.messages))


def characters(messages: object) -> int:
    return sum(len(m.text) for m in messages) // 4  # type: ignore[attr-defined]


def test_ollms_own_compactors_come_from_its_plugin_and_keep_the_protocol() -> None:
    registries = ollm.discover(settings=ollm.PluginSettings(allow=frozenset({"compactors"})))
    specs = registries.compactors.specs()
    assert list(specs) == ["auto", "clear-results", "trim", "summarize"]
    history = [ollm.Message.user("first")]
    for n in range(6):
        call = ollm.ToolCall(f"c{n}", "fetch", {"page": n})
        history += [
            ollm.Message.assistant("", tool_calls=(call,)),
            ollm.Message.tool(BIG, call=call),
        ]
    for name, spec in specs.items():
        compactor = spec.factory()
        assert isinstance(compactor, ollm.Compactor)
        sent = compactor.compact(history, fixed_tokens=10, target=5000, count=characters)
        assert_history_valid(ollm.Conversation(sent))
        assert characters(sent) <= 5000 < characters(history), name
        assert sent[0] is history[0], name
        assert sent[-1] is history[-1], name
