"""Strings that are not valid Unicode (lone surrogates) are written with U+FFFD wherever
ollm encodes them, never raised on: ``valid_unicode``, ``encode_json``, ``encode_event``
and the conversation log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ollm
from ollm.logs import LogStore

LONE = "\ud800"
REPLACED = "\ufffd"

_surrogates = st.integers(0xD800, 0xDFFF).map(chr)
any_text = st.lists(st.one_of(st.characters(), _surrogates), max_size=12).map("".join)
valid_text = st.text(max_size=12)


class Note(msgspec.Struct, frozen=True):
    title: str
    tags: tuple[str, ...] = ()
    extra: dict[str, Any] = {}


def nested(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Any nesting of dicts, lists, tuples and Structs around ``text`` and other values."""
    leaves = st.one_of(text, st.integers(), st.none(), st.booleans(), st.binary(max_size=4))
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.lists(inner, max_size=4).map(tuple),
            st.dictionaries(text, inner, max_size=4),
            st.builds(
                Note,
                text,
                st.lists(text, max_size=3).map(tuple),
                st.dictionaries(text, inner, max_size=3),
            ),
            st.builds(
                lambda name, args: ollm.ToolCall("call_1", name, args),
                text,
                st.dictionaries(text, inner, max_size=3),
            ),
        ),
        max_leaves=12,
    )


def has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(has_surrogate(v) for v in value)
    if isinstance(value, msgspec.Struct):
        return any(has_surrogate(getattr(value, f)) for f in value.__struct_fields__)
    return False


@given(nested(any_text))
def test_any_value_encodes_and_nothing_invalid_is_left(value: Any) -> None:
    encoded = ollm.encode_json(value)
    assert encoded == msgspec.json.encode(ollm.valid_unicode(value))
    assert not has_surrogate(ollm.valid_unicode(value))
    msgspec.json.decode(encoded)  # valid UTF-8 JSON


@given(nested(valid_text))
def test_valid_text_is_left_as_it_is(value: Any) -> None:
    assert ollm.valid_unicode(value) is value
    assert ollm.encode_json(value) == msgspec.json.encode(value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (LONE, REPLACED),
        ("a\udc80b", f"a{REPLACED}b"),
        ("\ud83d\ude00", "\U0001f600"),  # a pair spelt in UTF-16 is the character it encodes
        ("\ude00\ud83d", REPLACED * 2),  # the wrong way round is two lone ones
        ("café ☕", "café ☕"),
    ],
)
def test_each_lone_surrogate_becomes_one_replacement_character(text: str, expected: str) -> None:
    assert ollm.valid_unicode(text) == expected


def test_encode_event_writes_a_lone_surrogate_as_a_replacement_character() -> None:
    call = ollm.ToolCall("call_1", "lookup", {"query": LONE, LONE: [LONE]})
    line = ollm.encode_event(ollm.ToolCallStartEvent(call, 1))
    event = ollm.decode_chat_event(line)
    assert isinstance(event, ollm.ToolCallStartEvent)
    assert event.call.args == {"query": REPLACED, REPLACED: [REPLACED]}
    assert ollm.encode_event(ollm.TextEvent("fine")) == b'{"type":"text","text":"fine"}'


def test_the_log_stores_a_lone_surrogate_as_a_replacement_character(tmp_path: Path) -> None:
    call = ollm.ToolCall("call_1", "lookup", {"query": LONE})
    history = [
        ollm.Message.user(f"find {LONE}"),
        ollm.Message.assistant("", tool_calls=(call,)),
        ollm.Message.tool(f"nothing for {LONE}", call=call),
        ollm.Message.assistant(f"Sorry {LONE}."),
    ]
    with LogStore(tmp_path / "logs.db") as store:
        cid = store.save(ollm.Conversation(history), provider="p", system=f"be {LONE}")
        cid = store.log_exchange(
            cid, (), error_code="X", error_message=f"bad {LONE}", model=f"m{LONE}"
        )
        loaded = store.load(cid).messages
        info = store.info(cid)
        [response] = store.responses(cid)
        assert [i.id for i in store.list(query="find")] == [cid]
    assert [m.text for m in loaded] == [
        f"find {REPLACED}",
        "",
        f"nothing for {REPLACED}",
        f"Sorry {REPLACED}.",
    ]
    assert loaded[1].tool_calls[0].args == {"query": REPLACED}
    assert info.system == f"be {REPLACED}"
    assert response.error_message == f"bad {REPLACED}"
