"""Token limits: which counter counts a request (the provider's, a registered one, the
estimate, each only when it gives a positive whole number), the warning at 90% of the
window on any turn and with the reply's tokens reserved, and the words of a refusal.

Each test failed on a bug planted one at a time that the whole suite let through once
(tests/MUTATION.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from runtime_helpers import assert_one_finish_last, client, collect

import ollm
from ollm.runtime import count_request_tokens
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


async def test_a_registered_token_counter_is_used_after_the_providers_own() -> None:
    """The order: the provider's count, then a counter from ollm_token_counters, then the
    estimate."""

    class Counters:
        @ollm.hookimpl
        def ollm_token_counters(self) -> list[ollm.TokenCounterSpec]:
            return [ollm.TokenCounterSpec("m*", lambda request: 321)]

    registries = ollm.discover(settings=ollm.PluginSettings(autoload=False), plugins=[Counters()])
    request = ollm.ProviderRequest("model", (ollm.Message.user("hello"),))
    plain = ScriptedProvider(Reply("ok"))
    counting = ScriptedProvider(Reply("ok"), token_counter=lambda request: 55)
    assert await count_request_tokens(request, plain, registries.token_counters) == 321
    assert await count_request_tokens(request, counting, registries.token_counters) == 55
    other = ollm.ProviderRequest("other", (ollm.Message.user("hello"),))
    assert await count_request_tokens(other, plain, registries.token_counters) == (
        ollm.fallback_count(other)
    )

    # And a chat uses it: 321 tokens in a window of 350 is past 90%.
    chat_client = ollm.ChatClient(registries, provider=plain, model="model", context_window=350)
    events = await collect(chat_client.chat("hi"))
    warnings = [e for e in events if isinstance(e, ollm.TokenWarningEvent)]
    assert warnings == [ollm.TokenWarningEvent(321, 350, 350)]


async def test_the_90_percent_warning_comes_on_a_later_turn_too() -> None:
    """Turn 1 is small; after a tool result, turn 2 is past 90% and warns."""
    counts = iter([100, 950])

    @ollm.tool
    def look() -> str:
        """Look."""
        return "seen"

    provider = ScriptedProvider(
        Reply(tool_calls=[("look", {})]), Reply("done"), token_counter=lambda r: next(counts)
    )
    events = await collect(client(provider, tools=[look], context_window=1000).chat("x"))
    warnings = [e for e in events if isinstance(e, ollm.TokenWarningEvent)]
    assert warnings == [ollm.TokenWarningEvent(950, 1000, 1000)]
    assert_one_finish_last(events, "stop")


async def test_the_warning_counts_the_tokens_reserved_for_the_reply() -> None:
    """With max_tokens=200 of 1,000 reserved, 750 prompt tokens are past 90% of 800."""
    provider = ScriptedProvider(Reply("ok"), token_counter=lambda request: 750)
    chat_client = client(provider, context_window=1000)
    events = await collect(chat_client.chat("x", options=ollm.GenerationOptions(max_tokens=200)))
    warnings = [e for e in events if isinstance(e, ollm.TokenWarningEvent)]
    assert warnings == [ollm.TokenWarningEvent(750, 800, 1000)]
    # Without the reservation, 750 of 1,000 is below 90%: no warning.
    events = await collect(client(provider, context_window=1000).chat("x"))
    assert not [e for e in events if isinstance(e, ollm.TokenWarningEvent)]


@pytest.mark.parametrize("bad", [0, -3, 2.5, "12", None, RuntimeError("no tokenizer")])
async def test_a_count_that_is_not_a_positive_integer_falls_through_to_the_next(
    bad: Any,
) -> None:
    """The provider's bad count falls to the registered counter; its bad count, to the estimate."""

    def count(request: ollm.ProviderRequest) -> Any:
        if isinstance(bad, Exception):
            raise bad
        return bad

    registries = ollm.Registries()
    registries.token_counters.register(ollm.TokenCounterSpec("m*", lambda request: 99))
    request = ollm.ProviderRequest("model", (ollm.Message.user("hello there"),))
    provider = ScriptedProvider(Reply("ok"), token_counter=count)
    assert await count_request_tokens(request, provider, registries.token_counters) == 99

    failing = ollm.Registries()
    failing.token_counters.register(ollm.TokenCounterSpec("m*", count))
    plain = ScriptedProvider(Reply("ok"))
    assert await count_request_tokens(request, plain, failing.token_counters) == (
        ollm.fallback_count(request)
    )


async def test_a_failing_counter_is_logged_with_its_name_and_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(request: ollm.ProviderRequest) -> int:
        raise RuntimeError("no tokenizer")

    registries = ollm.Registries()
    registries.token_counters.register(ollm.TokenCounterSpec("m*", broken))
    request = ollm.ProviderRequest("model", (ollm.Message.user("hello"),))
    provider = ScriptedProvider(Reply("ok"), token_counter=broken)
    with caplog.at_level("WARNING", logger="ollm.runtime.tokens"):
        await count_request_tokens(request, provider, registries.token_counters)
    messages = [r.getMessage() for r in caplog.records]
    assert f"token counting by {provider.name!r} failed; estimating" in messages
    assert "token counter for 'model' failed; estimating" in messages
    assert all(r.exc_info is not None for r in caplog.records)


def test_a_blocked_request_explains_the_window_and_the_reservation() -> None:
    from ollm.runtime import TokenBudget

    budget = TokenBudget(estimated=900, context_window=1000, reserved=200)
    assert budget.blocked
    assert budget.explain("qwen3") == (
        "The request needs about 900 tokens, but qwen3 allows 800 (200 of its 1000 reserved "
        "for the reply). Nothing was sent. Start a new conversation, shorten the prompt, or "
        "raise the context window (context_window=...)."
    )
    plain = TokenBudget(estimated=1200, context_window=1000, reserved=0)
    assert "allows 1000. Nothing was sent." in plain.explain("qwen3")


async def test_a_count_of_one_is_a_count_and_counters_see_the_request() -> None:
    registries = ollm.Registries()
    registries.token_counters.register(
        ollm.TokenCounterSpec("m*", lambda request: len(request.messages) + 40)
    )
    request = ollm.ProviderRequest("model", (ollm.Message.user("a"), ollm.Message.user("b")))
    assert (
        await count_request_tokens(
            request, ScriptedProvider(Reply("ok")), registries.token_counters
        )
        == 42
    )
    one = ScriptedProvider(Reply("ok"), token_counter=lambda request: 1)
    assert await count_request_tokens(request, one, registries.token_counters) == 1
    counts_one = ollm.Registries()
    counts_one.token_counters.register(ollm.TokenCounterSpec("m*", lambda request: 1))
    plain = ScriptedProvider(Reply("ok"))
    long = ollm.ProviderRequest("model", (ollm.Message.user("x" * 400),))  # estimated: ~100
    assert await count_request_tokens(long, plain, counts_one.token_counters) == 1
