"""Writers of the conversation log: two that went on with one conversation fork it, a
prompt no model answered is kept short and apart, and a busy log says what to do."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ollm
from ollm.logs import UNANSWERED_PREVIEW, LogStore, LogsUnavailableError, logs_busy_timeout


def exchange(text: str) -> list[ollm.Message]:
    return [ollm.Message.user(text), ollm.Message.assistant(f"re: {text}")]


def texts(store: LogStore, cid: str) -> list[str]:
    return [m.text for m in store.load(cid).messages]


def test_a_second_writer_that_went_on_from_the_same_point_forks(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    with LogStore(path) as first, LogStore(path) as second:
        cid = first.log_exchange(None, exchange("shared"), provider="echo", model="m1")
        # Both load it (two messages), then each logs its own answer.
        assert first.log_exchange(cid, exchange("mine"), base=2) == cid
        fork = second.log_exchange(cid, exchange("theirs"), base=2, model="m2")
        assert fork != cid
        assert texts(first, cid) == ["shared", "re: shared", "mine", "re: mine"]
        assert texts(first, fork) == ["shared", "re: shared", "theirs", "re: theirs"]
        info = first.info(fork)
        assert (info.forked_from, info.forked_at, info.provider, info.model) == (
            cid,
            2,
            "echo",
            "m2",
        )
        assert first.info(cid).forked_from is None
        # The fork goes on as any conversation does (its writer knows it holds four).
        assert second.log_exchange(fork, exchange("more"), base=4) == fork
        assert len(texts(first, fork)) == 6
        latest = first.latest()
        assert latest is not None
        assert latest.id == fork


def test_a_writer_that_knows_the_conversation_as_it_is_appends(tmp_path: Path) -> None:
    with LogStore(tmp_path / "logs.db") as store:
        cid = store.log_exchange(None, exchange("one"))
        assert store.log_exchange(cid, exchange("two"), base=2) == cid
        assert store.log_exchange(cid, exchange("three")) == cid  # no base: no check
        assert len(texts(store, cid)) == 6
        assert store.info(cid).forked_from is None


def test_an_unanswered_prompt_is_kept_short_and_out_of_the_history(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    huge = "word " * 400_000  # 2 MB
    with LogStore(path) as store:
        cid = store.log_exchange(None, exchange("hello"))
        for _ in range(5):
            store.log_exchange(
                cid,
                (),
                base=2,
                unanswered=[ollm.Message.user(huge)],
                finish_reason="token_limit",
                error_code="TOKEN_LIMIT",
                error_message="Nothing was sent.",
            )
        assert texts(store, cid) == ["hello", "re: hello"]
        responses = store.responses(cid)
        assert [r.error_code for r in responses] == [None] + ["TOKEN_LIMIT"] * 5
        refused = responses[-1]
        assert refused.unanswered is not None
        assert refused.unanswered.startswith("word word")
        assert len(refused.unanswered) < UNANSWERED_PREVIEW + 50
        assert "2,000,000 characters in all" in refused.unanswered
        assert refused.messages_after == 2
        assert refused.error_message == "Nothing was sent."
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert path.stat().st_size < 200_000  # five 2 MB prompts, a few kilobytes


def test_a_first_prompt_no_model_answered_is_a_conversation_without_messages(
    tmp_path: Path,
) -> None:
    with LogStore(tmp_path / "logs.db") as store:
        cid = store.log_exchange(
            None,
            (),
            unanswered=[ollm.Message.user("Are you there?")],
            error_code="CONNECTION_FAILED",
            error_message="Ollama is not running.",
        )
        info = store.info(cid)
        assert (info.messages, info.preview) == (0, "Are you there?")
        assert store.load(cid).messages == ()


def test_a_lock_held_too_long_names_the_real_settings(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    LogStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with LogStore(path, busy_timeout=0) as store:
            with pytest.raises(LogsUnavailableError) as caught:
                store.log_exchange(None, exchange("blocked"))
            holder.execute("ROLLBACK")
            store.log_exchange(None, exchange("free again"))  # the same store works on
    finally:
        holder.close()
    message = caught.value.message
    assert "stayed locked by another program for 0 s" in message
    assert "OLLM_LOGS_PATH=" in message
    assert "OLLM_LOGS=off" in message
    assert "OLLM_LOGS_BUSY_TIMEOUT" in message
    assert "ollm_logs" not in message


def test_the_busy_timeout_is_a_number_of_seconds(tmp_path: Path) -> None:
    assert logs_busy_timeout({}) == 5.0
    assert logs_busy_timeout({"OLLM_LOGS_BUSY_TIMEOUT": " 0.25 "}) == 0.25
    for bad in ("soon", "-1", "nan", "inf"):
        with pytest.raises(LogsUnavailableError, match="OLLM_LOGS_BUSY_TIMEOUT"):
            logs_busy_timeout({"OLLM_LOGS_BUSY_TIMEOUT": bad})
    with pytest.raises(ValueError, match="0 or more seconds"):
        LogStore(tmp_path / "logs.db", busy_timeout=-1)
    with LogStore(tmp_path / "logs.db", busy_timeout=2) as store:
        assert store.busy_timeout == 2.0
        assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == 2000
