"""The pool as a provider: what it says of its members together (capabilities, models,
token counts), stopping a reply, many chats at once, and arguments it refuses."""

from __future__ import annotations

import anyio
import pytest
from pool_helpers import MODEL, chat, chats, client, finish, load, ollama, openai, states, text_of

import ollm
from ollm_pool import Member, PoolProvider
from ollm_testutils import FakeOllamaServer, FakeOpenAIServer, OllamaReply

pytestmark = pytest.mark.anyio


async def test_stopping_a_reply_releases_its_member_and_tries_no_other() -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b:
        load(b)
        b.script(OllamaReply.hanging(["Once upon "]))
        async with PoolProvider([Member(ollama(a), name="A"), Member(ollama(b), name="B")]) as pool:
            stream = client(pool).chat("a long story")
            events = []
            async for event in stream:
                events.append(event)
                if isinstance(event, ollm.TextEvent):
                    stream.abort()
            assert finish(events).reason == "cancelled"
            assert text_of(events) == "Once upon "
            assert states(pool)["B"].in_flight == 0
            assert states(pool)["B"].state == "closed"  # stopped, not failed
        assert chats(a) == 0


async def test_many_chats_at_once_leave_nothing_in_flight() -> None:
    with FakeOllamaServer() as a, FakeOllamaServer() as b, FakeOpenAIServer(models=[MODEL]) as c:
        pool = PoolProvider([ollama(a), ollama(b), Member(openai(c), parallel=8)])
        async with pool:
            chat_client = client(pool)
            texts: list[str] = []

            async def one() -> None:
                events = await chat(chat_client, conversation=ollm.Conversation())
                texts.append(text_of(events))

            async with anyio.create_task_group() as group:
                for _ in range(40):
                    group.start_soon(one)
            assert len(texts) == 40
            assert all(texts)
            assert sum(s.in_flight for s in pool.status()) == 0
            assert sum(s.attempts for s in pool.status()) == 40
            assert all(s.attempts > 0 for s in pool.status())  # more than slots: all used


async def test_a_member_sends_the_conversations_affinity_key_to_the_router_behind_it() -> None:
    with FakeOllamaServer() as a:
        member = ollama(a, affinity_header="x-session-id")
        async with PoolProvider([member], model_fallbacks=[MODEL]) as pool:
            chat_client = client(pool, model="big")  # not there: then the fallback model
            await chat(chat_client)
            await chat(chat_client)
        assert [r.json["model"] for r in a.chat_requests] == ["big", MODEL] * 2
        assert [r.headers.get("x-session-id") for r in a.chat_requests] == [
            chat_client.conversation.id
        ] * 4


async def test_what_the_pool_can_do_is_what_one_member_can_with_the_largest_window() -> None:
    with FakeOllamaServer(models=False) as a, FakeOpenAIServer(flavor="vllm", models=[MODEL]) as b:
        a.add_model(MODEL, capabilities=["completion"], parameters={"num_ctx": 8192})
        b.max_model_len = 32768
        pool = PoolProvider([ollama(a), openai(b, tools=True)])
        async with pool:
            found = await pool.model_capabilities(MODEL)
        assert (found.tools, found.context_window) == (True, 32768)


async def test_the_models_of_every_member_each_once() -> None:
    with FakeOllamaServer() as a, FakeOpenAIServer(models=[MODEL, "qwen"]) as b:
        async with PoolProvider([ollama(a), openai(b)]) as pool:
            names = [model.name for model in await pool.list_models()]
            assert names == sorted({"llama3.2:latest", MODEL, "qwen"})
            assert (await pool.show_model("qwen")).name == "qwen"
            with pytest.raises(ollm.ModelNotFoundError) as caught:
                await pool.show_model("nothing")
        assert caught.value.message == (
            "No member of pool has the model 'nothing'. See what they have with: "
            "ollm models -p pool list"
        )


async def test_tokens_are_counted_by_the_member_that_answered_the_conversation() -> None:
    with FakeOllamaServer() as a:
        async with PoolProvider([ollama(a)]) as pool:
            chat_client = client(pool)
            await chat(chat_client, "hello")
            request = ollm.ProviderRequest(
                model=MODEL,
                messages=(*chat_client.conversation.messages, ollm.Message.user("more")),
                conversation_id=chat_client.conversation.id,
            )
            counted = await pool.count_tokens(request)
            alone = await pool.members[0].provider.count_tokens(request)  # type: ignore[attr-defined]
            assert counted == alone  # the server's count for the history, plus the new text
            other = ollm.ProviderRequest(model=MODEL, messages=(ollm.Message.user("x" * 40),))
            assert await pool.count_tokens(other) == 10  # no conversation: characters / 4


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: PoolProvider([]), "a pool needs at least one member"),
        (lambda: PoolProvider("ollama"), "members must be a list of providers"),  # type: ignore[arg-type]
        (lambda: PoolProvider([_FakeProvider()], attempts=0), "attempts must be a whole number"),
        (lambda: PoolProvider([_FakeProvider()], wait_limit=-1), "wait_limit must be a number"),
        (lambda: PoolProvider([_FakeProvider()], model_fallbacks="x"), "model_fallbacks must be"),
        (lambda: Member(_FakeProvider(), parallel=0), "parallel must be at least 1"),
        (lambda: Member(object()), "a pool member must be a provider"),  # type: ignore[arg-type]
    ],
)
def test_arguments_a_pool_cannot_take_are_refused_in_words(build: object, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        build()  # type: ignore[operator]


def test_members_are_named_by_their_address_once_each() -> None:
    first, second = _FakeProvider(), _FakeProvider()
    pool = PoolProvider([first, Member(second, name="lab"), _FakeProvider()])
    assert [s.name for s in pool.status()] == ["fake", "lab", "fake #2"]


class _FakeProvider:
    name = "fake"

    async def chat_stream(self, request: ollm.ProviderRequest):  # type: ignore[no-untyped-def]
        yield ollm.FinishEvent("stop")
