"""Typed output is bounded, as tool-call arguments are: a model that streams a value
nested 100,000 deep ends ``OUTPUT_INVALID`` in words (never a ``RecursionError``), and
no partial value it shows nests deeper than ``MAX_JSON_DEPTH``; a JSON Schema past
ollm's bounds (depth, size, one enum's length) is refused at once, naming the bound."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from runtime_helpers import assert_history_valid, client

import ollm
from ollm.output.schema import MAX_SCHEMA_DEPTH, MAX_SCHEMA_ENUM, MAX_SCHEMA_NODES
from ollm.types.depth import MAX_JSON_DEPTH, nests_deeper_than
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

ITEMS = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "items": {"type": "array", "items": {}}},
    "required": ["name", "items"],
}


@pytest.mark.parametrize("pieces", [1, 37], ids=["one piece", "many pieces"])
async def test_a_value_nested_100000_deep_is_output_invalid(pieces: int) -> None:
    text = '{"items": ' + "[" * 100_000
    size = -(-len(text) // pieces)
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    chat_client = client(ScriptedProvider(Reply(chunks)))
    events = [event async for event in chat_client.chat("Go.", output=ITEMS, output_retries=0)]
    partial = [e.value for e in events if isinstance(e, ollm.PartialOutputEvent)]
    assert partial  # the start was shown...
    assert not any(nests_deeper_than(value, MAX_JSON_DEPTH) for value in partial)
    msgspec.json.encode(events)  # ...and every event encodes (ollm chat --json)
    (error,) = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "OUTPUT_INVALID"
    assert error.errors == (f"$: the value nests more than {MAX_JSON_DEPTH} levels deep",)
    assert "Recursion" not in error.message
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.reason == "error"
    assert_history_valid(chat_client.conversation)
    assert chat_client.conversation.messages[-1].text == text


async def test_a_correction_is_asked_for_a_value_too_deep() -> None:
    deep = '{"name": "x", "items": ' + "[" * 200 + "]" * 200 + "}"
    provider = ScriptedProvider(Reply(deep), Reply('{"name": "x", "items": [1]}'))
    result = await client(provider).run("Go.", output=ITEMS)
    assert result == {"name": "x", "items": [1]}


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"enum": list(range(1_000_000))}, f"more than {MAX_SCHEMA_ENUM:,}"),
        (_nested(5000), f"more than {MAX_SCHEMA_DEPTH} levels deep"),
        (
            {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(60_000)}},
            f"more than {MAX_SCHEMA_NODES:,} values",
        ),
    ],
    ids=["an enum of a million", "5000 deep", "120,000 values"],
)
async def test_a_schema_past_a_bound_is_refused_at_once(schema: Any, said: str) -> None:
    provider = ScriptedProvider(Reply("{}"))
    with pytest.raises(ValueError, match=said):
        client(provider).chat("Go.", output=schema)
    assert provider.requests == []


async def test_a_schema_at_the_bounds_is_used() -> None:
    schema = {
        "type": "object",
        "properties": {"c": {"enum": [f"v{i}" for i in range(MAX_SCHEMA_ENUM)]}},
        "required": ["c"],
    }
    chat_client = client(ScriptedProvider(Reply('{"c": "v9999"}')), context_window=100_000)
    result = await chat_client.run("Go.", output=schema)
    assert result == {"c": "v9999"}
    deep = _nested(MAX_SCHEMA_DEPTH // 2 - 1)  # two levels of dicts per array
    value = await client(ScriptedProvider(Reply("[[[]]]"))).run("Go.", output=deep)
    assert value == [[[]]]
