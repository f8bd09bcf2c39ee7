"""Leaving a chat early: the next chat on the same client works at once.

``break`` out of the loop, ``aclose()`` of the stream, or a stream simply dropped: the
partial reply is already in the history, marked incomplete, when the next chat starts,
and the provider's stream is closed soon after.
"""

from __future__ import annotations

import gc
import sys

import anyio
import pytest
from runtime_helpers import assert_history_valid, client, settle

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


def shape(conversation: ollm.Conversation) -> list[tuple[str, str, bool]]:
    return [(m.role, m.text, m.incomplete) for m in conversation.messages]


def provider() -> ScriptedProvider:
    return ScriptedProvider(Reply(["par", "tial", " rest"], delay=0.01), Reply("next"))


async def test_break_then_chat_again_at_once() -> None:
    scripted = provider()
    chat_client = client(scripted)
    signal = ollm.AbortSignal()
    async for event in chat_client.chat("one", abort=signal):
        if isinstance(event, ollm.TextEvent) and event.text == "tial":
            break
    assert shape(chat_client.conversation)[-1] == ("assistant", "partial", True)
    assert signal.reason == "the chat was left"
    result = await chat_client.run("two")
    assert result.text == "next"
    assert shape(chat_client.conversation) == [
        ("user", "one", False),
        ("assistant", "partial", True),
        ("user", "two", False),
        ("assistant", "next", False),
    ]
    assert_history_valid(chat_client.conversation)
    await settle(lambda: scripted.open_streams == 0)  # the loop closes the left generator


async def test_break_then_chat_again_works_every_time_in_one_event_loop() -> None:
    """Each chat borrows the loop's async-generator hooks; they must be given back whole."""
    scripted = ScriptedProvider(*[Reply(["par", "tial", " rest"], delay=0.01)] * 3)
    chat_client = client(scripted)
    hooks = sys.get_asyncgen_hooks()
    for number in range(3):
        async for event in chat_client.chat(f"chat {number}"):
            if isinstance(event, ollm.TextEvent):
                break
        assert shape(chat_client.conversation)[-1] == ("assistant", "par", True)
        # The loop's own hooks are back, for every other async generator of the program.
        assert sys.get_asyncgen_hooks() == hooks
    assert len(chat_client.conversation.messages) == 6
    assert_history_valid(chat_client.conversation)
    await settle(lambda: scripted.open_streams == 0)


async def test_aclose_then_chat_again() -> None:
    scripted = provider()
    chat_client = client(scripted)
    stream = chat_client.chat("one")
    async for event in stream:
        if isinstance(event, ollm.TextEvent):
            break
    await stream.aclose()
    assert shape(chat_client.conversation)[-1] == ("assistant", "par", True)
    assert (await chat_client.run("two")).text == "next"
    assert scripted.open_streams == 0


async def test_a_stream_dropped_mid_chat_is_settled_when_collected() -> None:
    scripted = provider()
    chat_client = client(scripted)
    stream = chat_client.chat("one")
    first = await stream.__anext__()
    while not isinstance(first, ollm.TextEvent):
        first = await stream.__anext__()
    del stream
    gc.collect()
    assert not chat_client.conversation.busy
    assert shape(chat_client.conversation)[-1] == ("assistant", "par", True)
    assert (await chat_client.run("two")).text == "next"


async def test_a_chat_still_running_keeps_the_conversation() -> None:
    """Leaving early frees the conversation; running concurrently still does not."""
    chat_client = client(provider())
    stream = chat_client.chat("one")
    await stream.__anext__()
    with pytest.raises(ollm.ConversationBusyError) as busy:
        await chat_client.run("two")
    assert busy.value.message == (
        "This conversation already has a chat in progress. Wait for it to finish, "
        "or use another conversation (conversation.fork())."
    )
    assert busy.value.code == "CONVERSATION_BUSY"
    await stream.aclose()
    assert (await chat_client.run("three")).text == "next"


async def test_a_chat_that_never_started_holds_nothing() -> None:
    chat_client = client(provider())
    stream = chat_client.chat("one")
    del stream
    gc.collect()
    assert (await chat_client.run("two")).text == "partial rest"


async def test_the_left_chat_closing_later_never_frees_the_next_chats_hold() -> None:
    scripted = ScriptedProvider(
        Reply(["a", "b"], delay=0.01), Reply(["c", "d"], delay=0.01), Reply("e")
    )
    chat_client = client(scripted)
    async for _event in chat_client.chat("one"):
        break
    second = chat_client.chat("two")
    await second.__anext__()
    await settle(lambda: scripted.open_streams == 1)  # the first chat's generator closed
    assert chat_client.conversation.busy
    with pytest.raises(ollm.ConversationBusyError):
        await chat_client.run("three")
    await second.aclose()


async def test_break_then_chat_again_after_a_call_settles_the_call_in_words() -> None:
    """A call that streamed before the caller left gets its result: it never ran."""
    ran: list[str] = []

    def look(city: str) -> str:
        """Look a city up."""
        ran.append(city)
        return "sunny"

    scripted = ScriptedProvider(
        Reply("Checking", tool_calls=[("look", {"city": "Oslo"})], delay=0.01), Reply("next")
    )
    chat_client = client(scripted, tools=[look])
    async for event in chat_client.chat("weather?"):
        if isinstance(event, ollm.ToolCallStartEvent):
            break
    assistant, result = chat_client.conversation.messages[1:]
    assert (assistant.text, assistant.incomplete) == ("Checking", True)
    assert [call.name for call in assistant.tool_calls] == ["look"]
    assert result.is_error
    assert result.text == "Tool 'look' did not run to its end: the chat was stopped."
    assert (await chat_client.run("and now?")).text == "next"
    assert ran == []
    assert_history_valid(chat_client.conversation)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_stream_kept_but_never_finished_is_closed_when_the_event_loop_ends(
    backend: str,
) -> None:
    """The event loop knows the chat's generator, and closes it (and the provider's) at its end."""
    scripted = provider()
    kept: list[object] = []

    async def main() -> None:
        events = client(scripted).chat("one").__aiter__()
        await events.__anext__()
        kept.append(events)  # neither finished, closed nor collected

    anyio.run(main, backend=backend)
    assert scripted.open_streams == 0
