"""Which member takes a request: where the model is loaded, then a free slot, then the
conversation's own member (fake Ollama servers on loopback, and the pure rule)."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pool_helpers import ManualClock, chat, chats, client, load, ollama, text_of, unload

import ollm
from ollm_pool import Member, PoolProvider
from ollm_pool._choice import Candidate, best
from ollm_testutils import FakeOllamaServer, OllamaReply

pytestmark = pytest.mark.anyio


async def test_ten_requests_go_to_the_member_where_the_model_is_loaded() -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(b)
        async with PoolProvider([ollama(a), ollama(b)]) as pool:
            chat_client = client(pool)
            for _ in range(10):
                chat_client.new_conversation()  # ten conversations: affinity plays no part
                assert text_of(await chat(chat_client)) == "Hello! How can I help you today?"
        assert (chats(a), chats(b)) == (0, 1 + 10)  # B's first chat is the test's own load


async def test_between_equal_members_each_conversation_keeps_to_its_own() -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(a)
        load(b)  # both have the model loaded: only the conversation tells them apart
        async with PoolProvider([ollama(a), ollama(b)]) as pool:
            seen: list[set[str]] = []
            for number in range(12):
                chat_client = client(pool)
                where: set[str] = set()
                for _ in range(3):  # three turns of one conversation
                    before = chats(a)
                    await chat(chat_client, f"turn of conversation {number}")
                    where.add("a" if chats(a) > before else "b")
                seen.append(where)
        assert all(len(where) == 1 for where in seen)
        assert {"a", "b"} == set().union(*seen)  # conversations spread over both


async def test_the_conversation_id_not_the_prompt_keeps_a_conversation_on_its_member() -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(a)
        load(b)
        async with PoolProvider([Member(ollama(a), name="A"), Member(ollama(b), name="B")]) as pool:
            chat_client = client(pool)
            seen: dict[int, set[str]] = {}
            for number in range(16):  # sixteen conversations that all begin alike
                conversation = ollm.Conversation(id=f"conversation {number}")
                for _ in range(2):
                    before = chats(a)
                    await chat(chat_client, "the same question", conversation=conversation)
                    seen.setdefault(number, set()).add("A" if chats(a) > before else "B")
        assert all(len(where) == 1 for where in seen.values())
        assert set().union(*seen.values()) == {"A", "B"}


async def test_the_loaded_models_are_read_again_only_after_two_seconds() -> None:
    clock = ManualClock()
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(b)
        async with PoolProvider(
            [Member(ollama(a), name="A"), Member(ollama(b), name="B")], clock=clock
        ) as pool:
            chat_client = client(pool)
            await chat(chat_client)  # the pool reads them (and each member, once, for itself)
            read = [len(s.requests_to("/api/ps")) for s in (a, b)]
            for _ in range(4):
                await chat(chat_client)
            assert [len(s.requests_to("/api/ps")) for s in (a, b)] == read
            unload(b)
            load(a)
            clock.advance(1.5)
            await chat(chat_client)  # the pool's reading is still young: to B
            assert (chats(a), chats(b)) == (1, 1 + 5 + 1 + 1)
            unload(b)
            clock.advance(0.5)
            await chat(chat_client)  # read again: the model is loaded on A alone
            assert (chats(a), chats(b)) == (2, 9)
            assert [len(s.requests_to("/api/ps")) for s in (a, b)] == [n + 1 for n in read]


async def test_a_request_past_a_members_parallelism_goes_where_a_slot_is_free() -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(b)
        b.script(OllamaReply.hanging(["Thinking"]))
        pool = PoolProvider([Member(ollama(a), name="A"), Member(ollama(b), name="B", parallel=1)])
        async with pool, anyio.create_task_group() as group:
            first = client(pool).chat("a long one")
            started = anyio.Event()

            async def hold() -> None:
                async for event in first:
                    started.set()
                    del event

            group.start_soon(hold)
            await started.wait()
            assert chats(b) == 1 + 1  # B's one slot is taken (the model is loaded there)
            assert text_of(await chat(client(pool), "another")) == (
                "Hello! How can I help you today?"
            )
            first.abort()
        assert chats(a) == 1  # the second request: on A, though the model must load there


# -- the rule itself --------------------------------------------------------------------

candidates = st.lists(
    st.builds(
        Candidate,
        name=st.text(min_size=1, max_size=8),
        probe=st.booleans(),
        tried=st.booleans(),
        in_flight=st.integers(0, 8),
        parallel=st.integers(1, 8),
        loaded=st.sampled_from([True, False, None]),
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda c: c.name,
)


@given(candidates, st.text(max_size=12), st.randoms())
def test_the_choice_does_not_depend_on_the_order_of_the_members(
    found: list[Candidate], key: str, rng: object
) -> None:
    shuffled = list(found)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert found[best(found, key)].name == shuffled[best(shuffled, key)].name


@given(candidates, st.text(max_size=12))
def test_the_choice_keeps_the_order_of_precedence(found: list[Candidate], key: str) -> None:
    chosen = found[best(found, key)]
    if any(c.probe for c in found):
        assert chosen.probe
        return
    if any(not c.tried for c in found):
        assert not chosen.tried
    peers = [c for c in found if c.tried == chosen.tried]
    free = [c for c in peers if c.in_flight < c.parallel]
    if free:
        assert chosen.in_flight < chosen.parallel
        if any(c.loaded is not False for c in free):
            assert chosen.loaded is not False


# A member's requests in flight, fewer than its parallelism.
free_slots = st.integers(1, 8).flatmap(lambda n: st.tuples(st.integers(0, n - 1), st.just(n)))


@given(st.lists(free_slots, min_size=2, max_size=6))
def test_among_free_members_the_least_busy_for_its_parallelism_is_chosen(
    loads: list[tuple[int, int]],
) -> None:
    found = [
        Candidate(f"member {number}", in_flight=in_flight, parallel=parallel, loaded=True)
        for number, (in_flight, parallel) in enumerate(loads)
    ]
    least = min(c.in_flight / c.parallel for c in found)
    for conversation in range(8):  # whichever conversation it is
        chosen = found[best(found, f"conversation {conversation}")]
        assert chosen.in_flight / chosen.parallel == least


@given(st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=6, unique=True))
def test_equal_members_are_chosen_by_the_conversation(names: list[str]) -> None:
    equal = [Candidate(name) for name in names]
    chosen = {equal[best(equal, f"conversation {n}")].name for n in range(64)}
    assert len(chosen) > 1  # conversations spread
    assert best(equal, "one") == best(equal, "one")  # and each keeps its member


def test_a_member_leaving_moves_only_its_own_conversations() -> None:
    members = [Candidate(name) for name in ("a", "b", "c")]
    keys = [f"conversation {n}" for n in range(200)]
    before = {key: members[best(members, key)].name for key in keys}
    without_c = members[:2]
    after = {key: without_c[best(without_c, key)].name for key in keys}
    assert all(after[key] == before[key] for key in keys if before[key] != "c")
