"""ollm.logs in Python: a Conversation saved to and loaded from the CLI's store."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

import ollm
from ollm.logs import LogStore, LogsUnavailableError, logging_enabled, logs_path
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


def rich_history() -> list[ollm.Message]:
    call = ollm.ToolCall("call_1", "get_weather", {"city": "Paris"}, signature="sig")
    return [
        ollm.Message.user("Weather?", images=(ollm.ImagePart(b"\x89PNG", "image/png"),)),
        ollm.Message.assistant("", tool_calls=(call,), thinking="Paris first."),
        ollm.Message.tool("18°C", call=call),
        ollm.Message.assistant("It is 18°C.", incomplete=True),
    ]


def test_a_conversation_round_trips_with_everything_it_holds(tmp_path: Path) -> None:
    with LogStore(tmp_path / "logs.db") as store:
        conversation = ollm.Conversation(rich_history())
        cid = store.save(conversation, provider="ollama", model="llama3.2", system="Be brief.")
        loaded = store.load(cid)
        info = store.info(cid)
    assert loaded.messages == conversation.messages
    assert (info.provider, info.model, info.system, info.messages) == (
        "ollama",
        "llama3.2",
        "Be brief.",
        4,
    )


def test_saving_again_adds_only_what_is_new(tmp_path: Path) -> None:
    conversation = ollm.Conversation([ollm.Message.user("one")])
    with LogStore(tmp_path / "logs.db") as store:
        cid = store.save(conversation)
        conversation.append(ollm.Message.assistant("two"))
        assert store.save(conversation, cid) == cid
        assert store.save(conversation, cid) == cid
        assert [m.text for m in store.load(cid).messages] == ["one", "two"]


async def test_a_chat_saved_then_continued_from_the_store(tmp_path: Path) -> None:
    provider = ScriptedProvider(Reply(["Hello Ada."]), Reply(["You are Ada."]))
    client = ollm.ChatClient(ollm.Registries(), provider=provider)
    await client.run("I am Ada.")
    with LogStore(tmp_path / "logs.db") as store:
        cid = store.save(client.conversation, provider=provider.name)
        again = ollm.ChatClient(ollm.Registries(), provider=provider, conversation=store.load(cid))
    result = await again.run("Who am I?")
    assert result.text == "You are Ada."
    assert [m.text for m in provider.requests[1].messages] == [
        "I am Ada.",
        "Hello Ada.",
        "Who am I?",
    ]


def test_search_list_latest_and_prefixes(tmp_path: Path) -> None:
    with LogStore(tmp_path / "logs.db") as store:
        owls = store.save(ollm.Conversation([ollm.Message.user("Owls hunt at night")]))
        cats = store.save(ollm.Conversation([ollm.Message.user("Cats sleep all day")]))
        assert [i.id for i in store.list(query="owls")] == [owls]
        assert [i.id for i in store.list(query="night owls")] == [owls]
        assert store.list(query="dogs") == []
        latest = store.latest()
        assert latest is not None
        assert latest.id == cats
        assert store.resolve(owls[:16]) == owls
        with pytest.raises(LogsUnavailableError, match="no logged conversation"):
            store.load("zzzz")
        store.remove(owls)
        assert [i.id for i in store.list()] == [cats]
        assert store.list(query="owls") == []  # the search index forgot it too


def test_writers_in_several_threads_each_with_its_store(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    LogStore(path).close()
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            with LogStore(path) as store:
                for k in range(10):
                    store.save(ollm.Conversation([ollm.Message.user(f"writer {n} message {k}")]))
        except BaseException as exc:  # pragma: no cover - the assertion shows it
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with LogStore(path) as store:
        assert len(store.list(limit=100)) == 40


def test_the_schema_is_migrated_from_an_empty_database_and_versioned(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    sqlite3.connect(path).close()  # an existing file at version 0
    LogStore(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 5
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 6")
    with pytest.raises(LogsUnavailableError, match="newer ollm"):
        LogStore(path)


def test_where_the_log_is_and_whether_it_is_on(tmp_path: Path) -> None:
    assert logs_path({"OLLM_LOGS_PATH": str(tmp_path / "x.db")}) == tmp_path / "x.db"
    home = logs_path({"HOME": "/home/ada"})
    assert home.name == "logs.db"
    assert home.parent.name == "ollm"
    assert logs_path({"HOME": "/h", "XDG_DATA_HOME": "/data"}).parent == Path("/data/ollm") or (
        home.parent.parent.name == "Application Support"
    )
    assert logging_enabled({})
    for off in ("off", "0", "false", "NO"):
        assert not logging_enabled({"OLLM_LOGS": off})
