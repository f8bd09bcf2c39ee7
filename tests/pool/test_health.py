"""A member that cannot be reached is left alone, then probed once, then used again; when
every member rests, a request waits for the first to be ready (within the wait limit).

The breakers read a ``ManualClock``: "the backoff is over" is the test moving the clock.
"""

from __future__ import annotations

import anyio
import pytest
from pool_helpers import (
    ManualClock,
    chat,
    chats,
    client,
    errors,
    finish,
    load,
    notices,
    ollama,
    resetting,
    states,
    text_of,
    unload,
    without_waiting,
)

import ollm
from ollm_pool import CircuitBreaker, Member, PoolProvider
from ollm_testutils import FakeOllamaServer, OllamaReply

pytestmark = pytest.mark.anyio

HELLO = "Hello! How can I help you today?"


def pool_of(*members: Member, clock: ManualClock, **settings: object) -> PoolProvider:
    return PoolProvider(list(members), clock=clock, **settings)  # type: ignore[arg-type]


async def test_a_dead_member_costs_one_attempt_then_rests_then_one_probe() -> None:
    clock = ManualClock()
    with FakeOllamaServer() as a:
        b = FakeOllamaServer().start()
        port = b.port
        load(b)
        pool = pool_of(Member(ollama(a), name="A"), Member(ollama(b), name="B"), clock=clock)
        async with pool:
            chat_client = client(pool)
            assert text_of(await chat(chat_client)) == HELLO
            assert states(pool)["B"].attempts == 1  # the model is loaded there

            b.stop()  # B is killed
            events = await chat(chat_client)
            assert text_of(events) == HELLO  # from A
            (notice,) = notices(events)  # both members, and why (refused, or reset)
            assert notice.startswith("B failed (CONNECTION_FAILED: Ollama ")
            assert f"http://127.0.0.1:{port}" in notice
            assert notice.endswith("; trying A.")
            assert states(pool)["B"].attempts == 2  # one connection attempt
            assert states(pool)["B"].state == "open"
            for _ in range(5):  # during the backoff: A alone, not one attempt at B
                events = await chat(chat_client)
                assert text_of(events) == HELLO
                assert notices(events) == []
            assert states(pool)["B"].attempts == 2
            assert chats(a) == 6

            with FakeOllamaServer(port=port) as back:  # B is back, the model loaded there
                load(back)
                unload(a)
                # The backoff is over, and so is the pool's reading of what A has loaded.
                clock.advance(max(states(pool)["B"].retry_in or 0, pool.running_seconds))
                assert states(pool)["B"].state == "half-open"
                events = await chat(chat_client)
                assert text_of(events) == HELLO
                assert chats(back) == 1 + 1  # the test's load, and the probe
                assert states(pool)["B"].state == "closed"
                for _ in range(3):
                    await chat(chat_client)
                assert chats(back) == 1 + 4  # B is used again
                assert chats(a) == 6 + 1  # nothing more than the test's unload


async def test_the_first_request_after_the_backoff_is_the_members_probe() -> None:
    clock = ManualClock()
    with FakeOllamaServer() as a:
        b = FakeOllamaServer().start()
        port = b.port
        load(a)
        load(b)
        pool = pool_of(Member(ollama(a), name="A"), Member(ollama(b), name="B"), clock=clock)
        async with pool:
            chat_client = client(pool)
            # Conversations that go to A, and to B, while both are equal.
            found: dict[str, ollm.Conversation] = {}
            for number in range(40):
                conversation = ollm.Conversation(id=f"conversation {number}")
                before = chats(a)
                await chat(chat_client, conversation=conversation)
                found.setdefault("A" if chats(a) > before else "B", conversation)
                if len(found) == 2:
                    break
            b.stop()
            await chat(chat_client, conversation=found["B"])  # B fails: its circuit opens
            assert states(pool)["B"].state == "open"
            with FakeOllamaServer(port=port) as back:
                load(back)
                clock.advance(states(pool)["B"].retry_in or 0)
                # A's own conversation, yet B's probe: a member that is back is tried first.
                assert text_of(await chat(chat_client, conversation=found["A"])) == HELLO
                assert chats(back) == 1 + 1
                assert states(pool)["B"].state == "closed"


async def test_a_reset_connection_opens_the_circuit_after_one_connection() -> None:
    clock = ManualClock()
    with FakeOllamaServer() as a, resetting() as b:
        pool = pool_of(Member(ollama(b.url), name="B"), Member(ollama(a), name="A"), clock=clock)
        async with pool:
            chat_client = client(pool)
            assert text_of(await chat(chat_client)) == HELLO  # from A
            assert b.accepted == 1  # B was asked once (its loaded models), and reset
            assert states(pool)["B"].state == "open"
            for _ in range(4):
                assert text_of(await chat(chat_client)) == HELLO
            assert b.accepted == 1  # the backoff: no connection to B at all
            clock.advance(1.0)
            events = await chat(chat_client)  # B's probe, reset again: open for 2 s now
            assert notices(events)[0].startswith("B failed (CONNECTION_FAILED: ")
            assert text_of(events) == HELLO
            assert states(pool)["B"].failures == 2
            assert states(pool)["B"].retry_in == 2.0


async def test_when_every_member_rests_a_request_waits_for_the_first_probe() -> None:
    clock = ManualClock()
    a = FakeOllamaServer().start()
    b = FakeOllamaServer().start()
    ports = a.port, b.port
    a.stop()
    b.stop()
    pool = pool_of(
        Member(ollama(a), name="A"), Member(ollama(b), name="B"), clock=clock, backoff=2.0
    )
    async with pool:
        # Both are down (the request finds them so before it sends anything): it waits
        # for the first circuit to half-open instead of failing at once.
        events: list[object] = []

        async def ask() -> None:
            try:
                events.extend(await chat(client(pool)))
            finally:
                clock.over()

        servers: list[FakeOllamaServer] = []
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                assert await clock.sleeping() == 2.0
                assert {s.state for s in states(pool).values()} == {"open"}
                servers += [FakeOllamaServer(port=port).start() for port in ports]  # back
                clock.advance(2.0)
                assert await clock.sleeping() is None  # it answered, with no other wait
        finally:
            for server in servers:
                server.stop()
        assert text_of(events) == HELLO
        assert sum(chats(server) for server in servers) == 1  # one probe, and it answered
        (waiting,) = notices(events, "retry")  # the user is told why nothing happens yet
        assert waiting == (
            "No member of the pool 'pool' can take the request now ("
            f"A: it could not be reached (Ollama is not running at {a.url}), and is left "
            f"alone for 2 s more; B: it could not be reached (Ollama is not running at {b.url}), "
            "and is left alone for 2 s more); it waits up to 2 s for the first to be ready."
        )
        assert finish(events).usage is not None
        assert finish(events).usage.attempts == 1


async def test_a_request_that_finds_a_probe_under_way_waits_for_its_outcome() -> None:
    clock = ManualClock()
    a = FakeOllamaServer().start()
    port = a.port
    a.stop()
    pool = pool_of(Member(ollama(a), name="A"), clock=clock)
    async with pool:
        streams = [client(pool).chat("hi") for _ in range(2)]
        answers: list[list[object]] = [[], []]
        answered = anyio.Event()

        async def read(number: int) -> None:
            async for event in streams[number]:
                answers[number].append(event)
            if text_of(answers[number]) == HELLO:
                answered.set()

        servers: list[FakeOllamaServer] = []
        try:
            with anyio.fail_after(30):  # a hang detector: a wait for a probe that never ends
                async with anyio.create_task_group() as group:
                    group.start_soon(read, 0)
                    group.start_soon(read, 1)
                    assert await clock.sleeping(2) == 1.0  # both wait for A's backoff
                    back = FakeOllamaServer(port=port).start()  # A is back
                    servers.append(back)
                    back.script(OllamaReply.hanging(["Once upon "]))  # the probe's reply
                    # One request probes A; the other waits for the outcome (A answers:
                    # its reply has begun), instead of failing at once because the only
                    # member is being probed, or waiting for the whole reply.
                    clock.advance(1.0)
                    await answered.wait()
                    for stream in streams:
                        stream.abort()
        finally:
            for server in servers:
                server.stop()
        assert sorted(text_of(events) for events in answers) == [HELLO, "Once upon "]
        for events in answers:  # both were told of the wait for A's backoff
            assert [n.rsplit("; ", 1)[1] for n in notices(events, "retry")] == [
                "it waits up to 1 s for the first to be ready."
            ]
        assert sorted(finish(events).reason for events in answers) == ["cancelled", "stop"]
        assert chats(servers[0]) == 2


async def test_a_wait_longer_than_the_limit_fails_at_once_naming_every_member() -> None:
    clock = ManualClock()
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        members = Member(ollama(a), name="A"), Member(ollama(b), name="B")
        pool = pool_of(*members, clock=clock, backoff=60.0, wait_limit=10.0)
        a.stop()
        b.stop()
        async with pool:
            events = await without_waiting(clock, client(pool))
            (error,) = errors(events)
            assert error.code == "CONNECTION_FAILED"
            assert finish(events).reason == "error"
            for name, server in (("A", a), ("B", b)):
                assert (
                    f"{name}: not tried (it could not be reached (Ollama is not running at "
                    f"{server.url}), and is left alone for 60 s more)"
                ) in error.message
            assert error.message.startswith("No member of the pool 'pool' could answer for ")


async def test_stopping_a_request_that_waits_for_a_member_ends_it_cancelled() -> None:
    clock = ManualClock()
    with FakeOllamaServer() as a:
        a.stop()
        pool = pool_of(Member(ollama(a), name="A"), clock=clock)
        async with pool:
            stream = client(pool).chat("hi")
            events: list[object] = []

            async def read() -> None:
                try:
                    events.extend([event async for event in stream])
                finally:
                    clock.over()

            async with anyio.create_task_group() as group:
                group.start_soon(read)
                assert await clock.sleeping() is not None
                stream.abort()
            assert finish(events).reason == "cancelled"


# -- the breaker alone --------------------------------------------------------------------


def test_the_backoff_doubles_for_each_failed_probe_up_to_its_limit() -> None:
    breaker = CircuitBreaker(backoff=1.0, max_backoff=4.0)
    now = 0.0
    waits = []
    for _ in range(5):
        probe = breaker.take(now)
        breaker.failure(now, probe=probe)
        assert breaker.open_until is not None
        waits.append(breaker.open_until - now)
        now = breaker.open_until
        assert breaker.state(now) == "half-open"
    assert waits == [1.0, 2.0, 4.0, 4.0, 4.0]
    breaker.take(now)
    assert breaker.state(now) == "open"  # one probe at a time
    breaker.success()
    assert breaker.state(now) == "closed"
    assert breaker.failures == 0


def test_requests_that_were_under_way_when_the_circuit_opened_do_not_lengthen_it() -> None:
    breaker = CircuitBreaker(backoff=1.0)
    breaker.failure(10.0, probe=False)
    for _ in range(9):  # nine more requests that were sent before it opened
        breaker.failure(10.0, probe=False)
    assert (breaker.failures, breaker.open_until) == (1, 11.0)


def test_a_probe_stopped_without_an_answer_leaves_the_circuit_half_open() -> None:
    breaker = CircuitBreaker(backoff=1.0)
    breaker.failure(0.0, probe=False)
    probe = breaker.take(1.0)
    assert probe
    assert breaker.ready_at(1.0) == float("inf")
    breaker.release(probe)
    assert breaker.state(1.0) == "half-open"
    assert breaker.ready_at(1.0) == 1.0
