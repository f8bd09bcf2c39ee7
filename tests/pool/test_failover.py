"""Failover only before the reply starts, one retry budget, and the words when no member
could answer: two or three fake Ollama servers, and a fake vLLM as a mixed member."""

from __future__ import annotations

import anyio
import pytest
from pool_helpers import (
    MODEL,
    ManualClock,
    chat,
    chats,
    client,
    errors,
    finish,
    load,
    notices,
    ollama,
    openai,
    states,
    text_of,
    unload,
    without_waiting,
)

import ollm
from ollm_pool import Member, PoolProvider
from ollm_testutils import FakeOllamaServer, FakeOpenAIServer, OllamaReply, OpenAIReply

pytestmark = pytest.mark.anyio

HELLO = "Hello! How can I help you today?"


async def test_a_reply_that_broke_off_is_never_continued_by_another_member() -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(b)
        b.script(OllamaReply.disconnect(["one ", "two ", "three "]))  # then the connection goes
        async with PoolProvider([Member(ollama(a), name="A"), Member(ollama(b), name="B")]) as pool:
            chat_client = client(pool)
            events = await chat(chat_client)
        assert text_of(events) == "one two three "  # once, and B's alone
        (error,) = errors(events)
        assert error.code == "STREAM_INTERRUPTED"
        assert error.message.startswith("The reply from B broke off after it had started (")
        assert finish(events).reason == "error"
        assert notices(events) == []
        assert chats(a) == 0  # A received nothing
        reply = chat_client.conversation.messages[-1]
        assert (reply.text, reply.incomplete) == ("one two three ", True)


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize(
    ("reply", "began"),
    [
        (OllamaReply(thinking=["Let me ", "think"], end="close"), ollm.ThinkingEvent),
        (OllamaReply(tool_calls=[("add", {"a": 2, "b": 3})], end="close"), ollm.ToolCallStartEvent),
    ],
    ids=["thinking", "tool call"],
)
async def test_a_reply_that_began_with_thinking_or_a_tool_call_is_not_sent_elsewhere(
    reply: OllamaReply, began: type
) -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(b)
        b.script(reply)  # then the connection goes
        async with PoolProvider([Member(ollama(a), name="A"), Member(ollama(b), name="B")]) as pool:
            events = await chat(client(pool, tools=[add]))
        assert any(isinstance(e, began) for e in events)
        (error,) = errors(events)
        assert error.code == "STREAM_INTERRUPTED"
        assert error.message.startswith("The reply from B broke off after it had started (")
        assert (notices(events), text_of(events)) == ([], "")
        assert chats(a) == 0  # A received nothing


async def test_every_member_busy_costs_three_attempts_in_all_and_names_each() -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b, FakeOpenAIServer(models=[MODEL]) as c:
        for server in (a, b):
            server.fail(503, "server busy, please try again", path="/api/chat", retry_after=1)
        c.reply_with(lambda body: OpenAIReply.failure(503, "Service Unavailable", retry_after=1))
        members = [
            Member(ollama(a), name="A"),
            Member(ollama(b), name="B"),
            Member(openai(c), name="C"),
        ]
        async with PoolProvider(members) as pool:
            events = await chat(client(pool))
        assert chats(a) + chats(b) + chats(c) == 3  # the members' own retries are off
        (error,) = errors(events)
        assert error.code == "RATE_LIMITED"
        assert error.message.startswith(
            "No member of the pool 'pool' could answer for 'llama3.2' (3 attempts): A: Ollama at"
        )
        for name in ("A", "B", "C"):
            assert f"; {name}: " in error.message or f": {name}: " in error.message
        assert len(notices(events)) == 2  # A to B, B to C (in some order)


async def test_two_busy_members_are_tried_again_once_they_said_they_would_be_ready() -> None:
    clock = ManualClock()
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        # Waits of their own, neither the pool's backoff (1 s) nor the same for both.
        a.fail(503, "server busy", path="/api/chat", retry_after=3, times=1)
        b.fail(503, "server busy", path="/api/chat", retry_after=5, times=1)
        pool = PoolProvider([ollama(a), ollama(b)], clock=clock)
        async with pool, anyio.create_task_group() as group:
            events: list[object] = []

            async def ask() -> None:
                try:
                    events.extend(await chat(client(pool)))
                finally:
                    clock.over()

            group.start_soon(ask)
            assert await clock.sleeping() == 3.0  # until the first is ready again
            clock.advance(3.0)
            assert await clock.sleeping() is None  # it answered, with no other wait
        assert text_of(events) == HELLO
        assert (chats(a), chats(b)) == (2, 1)
        assert finish(events).usage is not None
        assert finish(events).usage.attempts == 3


async def test_a_member_that_asked_to_wait_is_left_alone_as_long_as_it_asked() -> None:
    clock = ManualClock()
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(a)  # A is where the model is loaded: every request would go there
        a.fail(429, "slow down", path="/api/chat", retry_after=5, times=1)
        pool = PoolProvider([Member(ollama(a), name="A"), Member(ollama(b), name="B")], clock=clock)
        async with pool:
            events = await without_waiting(clock, client(pool))
            assert text_of(events) == HELLO
            (notice,) = notices(events)
            assert notice.startswith("A failed (RATE_LIMITED: ")
            assert notice.endswith("; trying B.")
            for _ in range(3):  # other conversations: not to A, which asked for 5 s
                assert notices(await without_waiting(clock, client(pool))) == []
            unload(b)
            clock.advance(2.0)  # the pool reads the loaded models again: A's only
            await without_waiting(clock, client(pool))
            assert (chats(a), chats(b)) == (1 + 1, 4 + 1 + 1)  # the loads, the 429; B's unload
            unload(b)
            clock.advance(3.0)  # A's 5 s are over
            assert notices(await without_waiting(clock, client(pool))) == []
            assert chats(a) == 1 + 1 + 1


async def test_members_without_the_model_do_not_use_the_retry_budget() -> None:
    servers = [FakeOpenAIServer(models=["other"]).start() for _ in range(3)]
    try:
        with FakeOllamaServer() as d:  # the model is not loaded there: tried last
            members = [Member(openai(s), name=n) for s, n in zip(servers, "ABC", strict=True)]
            async with PoolProvider([*members, Member(ollama(d), name="D")], attempts=3) as pool:
                events = await chat(client(pool))
        assert text_of(events) == HELLO
        assert sorted(n.split(" ", 1)[0] for n in notices(events)) == ["A", "B", "C"]
        assert finish(events).usage is not None
        assert finish(events).usage.attempts == 4
    finally:
        for server in servers:
            server.stop()


async def test_a_wait_longer_than_the_limit_is_not_waited_for() -> None:
    clock = ManualClock()
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        for server in (a, b):
            server.fail(429, "slow down", path="/api/chat", retry_after=120)
        async with PoolProvider([ollama(a), ollama(b)], wait_limit=30, clock=clock) as pool:
            events = await without_waiting(clock, client(pool))
        assert chats(a) + chats(b) == 2
        assert errors(events)[0].code == "RATE_LIMITED"


async def test_a_context_error_moves_the_request_to_a_member_with_a_larger_window() -> None:
    with FakeOllamaServer(models=False) as a, FakeOpenAIServer(flavor="vllm", models=[MODEL]) as b:
        a.add_model(MODEL, parameters={"num_ctx": 32768})  # not loaded: B is tried first
        b.context_window = b.max_model_len = 64
        pool = PoolProvider([Member(ollama(a), name="A"), Member(openai(b), name="B")])
        async with pool:
            events = await chat(client(pool), "a question " * 40)  # ~110 tokens
        assert text_of(events) == HELLO
        (notice,) = notices(events)  # names both members, and why
        assert notice.startswith(
            f"B failed (CONTEXT_EXCEEDED: The server at {b.base_url} refused the request: the "
            "conversation is too long for 'llama3.2' (118 tokens, for a window of 64)"
        )
        assert notice.endswith("); trying A.")
        assert (chats(b), chats(a)) == (1, 1)
        assert finish(events).usage is not None
        assert finish(events).usage.attempts == 2


async def test_a_context_error_with_no_larger_window_fails_naming_the_others() -> None:
    with FakeOllamaServer(models=False) as a, FakeOpenAIServer(flavor="vllm", models=[MODEL]) as b:
        a.add_model(MODEL, parameters={"num_ctx": 32})
        b.context_window = b.max_model_len = 64
        async with PoolProvider([Member(ollama(a), name="A"), Member(openai(b), name="B")]) as pool:
            # The window the chat says: the runtime sends what the members would refuse.
            events = await chat(client(pool, context_window=100_000), "a question " * 40)
        (error,) = errors(events)
        assert error.code == "CONTEXT_EXCEEDED"
        assert "A: not tried (its context window is not known to be larger than 64 tokens)" in (
            error.message
        )
        assert chats(a) == 0


async def test_a_model_that_cannot_call_tools_there_is_asked_where_it_can() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    with FakeOllamaServer(models=False) as a, FakeOllamaServer(models=False) as b:
        a.add_model(MODEL, capabilities=["completion"])  # no tools here
        b.add_model(MODEL)
        load(a)  # A is where the model is loaded: tried first
        pool = PoolProvider([Member(ollama(a), name="A"), Member(ollama(b), name="B")])
        async with pool:
            events = await chat(client(pool, tools=[add], tool_strategy="native"))
        assert text_of(events) == HELLO
        (notice,) = notices(events)
        assert notice.startswith("A failed (TOOLS_UNSUPPORTED: ")
        assert notice.endswith("trying B.")


async def test_when_no_member_takes_tools_the_runtime_falls_back_to_react() -> None:
    import ollm_react.plugin

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    with FakeOllamaServer(models=False) as a, FakeOllamaServer(models=False) as b:
        for server in (a, b):
            server.add_model(MODEL, capabilities=None)  # too old to say
            server.reply_with(
                lambda body: (
                    OllamaReply.http_error(400, f"{MODEL} does not support tools")
                    if body.get("tools")
                    else "Final Answer: 5"
                )
            )
        registries = ollm.discover(plugins=[ollm_react.plugin], entry_points=[])
        pool = PoolProvider([Member(ollama(a), name="A"), Member(ollama(b), name="B")])
        async with pool:
            chat_client = ollm.ChatClient(registries, provider=pool, model=MODEL, tools=[add])
            events = await chat(chat_client, "2 + 3?")
        assert text_of(events) == "5"
        assert any(
            isinstance(e, ollm.NoticeEvent) and e.kind == "strategy" for e in events
        )  # switched to ReAct, after both members refused


async def test_a_member_without_the_model_sends_the_request_on() -> None:
    with FakeOpenAIServer(models=["other"]) as a, FakeOllamaServer() as b:
        # A (a vLLM server, say) keeps its model loaded: it is tried first, and has not this one.
        pool = PoolProvider([Member(openai(a), name="A"), Member(ollama(b), name="B")])
        async with pool:
            events = await chat(client(pool))
            assert text_of(events) == HELLO
            (notice,) = notices(events)
            assert notice.startswith("A failed (MODEL_NOT_FOUND: ")
            assert notice.endswith("; trying B.")
            for _ in range(3):
                assert text_of(await chat(client(pool))) == HELLO
        assert chats(b) == 4


async def test_the_fallback_models_come_after_every_member_failed_for_the_model() -> None:
    with FakeOllamaServer(models=["small"]) as a, FakeOllamaServer(models=["small"]) as b:
        pool = PoolProvider(
            [Member(ollama(a), name="A"), Member(ollama(b), name="B")], model_fallbacks=["small"]
        )
        async with pool:
            events = await chat(client(pool))
        assert text_of(events) == HELLO
        asked = [r.json["model"] for r in a.chat_requests + b.chat_requests]
        assert sorted(asked) == ["llama3.2", "llama3.2", "small"]
        assert finish(events).usage is not None
        assert finish(events).usage.attempts == 3


async def test_a_server_error_sends_the_request_to_the_next_member() -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(a)
        a.script(OllamaReply.internal_error())
        async with PoolProvider([Member(ollama(a), name="A"), Member(ollama(b), name="B")]) as pool:
            events = await chat(client(pool))
            assert states(pool)["A"].state == "closed"  # it answered: it is there
        assert text_of(events) == HELLO
        assert notices(events)[0].startswith("A failed (PROVIDER_ERROR: Ollama at ")


async def test_a_request_no_server_would_take_is_not_sent_elsewhere() -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(a)
        a.script(OllamaReply.http_error(400, "invalid options"))
        async with PoolProvider([Member(ollama(a), name="A"), Member(ollama(b), name="B")]) as pool:
            events = await chat(client(pool))
        assert [e.code for e in errors(events)] == ["INVALID_REQUEST"]
        assert chats(b) == 0
