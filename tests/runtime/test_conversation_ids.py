"""Each conversation has an id, and every request of it carries that id
(``ProviderRequest.conversation_id``): what a pool, or a router in front of many servers,
keys on to keep a conversation where its prompt is cached."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ollm
from ollm.logs import LogStore
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


def test_a_conversation_has_an_id_of_its_own() -> None:
    ids = {ollm.Conversation().id for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"[0-9a-f]{32}", found) for found in ids)
    given = ollm.Conversation([ollm.Message.user("hi")], id="kept")
    assert given.id == "kept"
    assert given.fork().id != "kept"  # another path, another conversation
    saved = given.to_json()
    assert ollm.Conversation.from_json(saved, id="kept").id == "kept"
    assert ollm.Conversation.from_json(saved).id != "kept"


@pytest.mark.parametrize("bad", ["", 3])
def test_an_id_that_is_not_a_string_is_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="a conversation's id must be a non-empty string"):
        ollm.Conversation(id=bad)  # type: ignore[arg-type]


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_every_request_of_a_conversation_names_it() -> None:
    provider = ScriptedProvider(
        Reply(tool_calls=[("add", {"a": 1, "b": 2})]), Reply("3."), Reply("Again 3."), Reply("x")
    )
    client = ollm.ChatClient(ollm.Registries(), provider=provider, model="m", tools=[add])
    await client.run("1 + 2?")
    await client.run("Once more?")
    other = client.new_conversation()
    await client.run("Something else")
    ids = [request.conversation_id for request in provider.requests]
    first = ids[0]
    assert first is not None
    assert ids == [first, first, first, other.id]
    assert other.id != first


async def test_a_conversation_continued_from_the_log_keeps_its_id(tmp_path: Path) -> None:
    with LogStore(tmp_path / "logs.db") as store:
        cid = store.save(ollm.Conversation([ollm.Message.user("hi")]), provider="p", model="m")
        assert store.load(cid).id == cid
        assert store.load(cid[:8]).id == cid
