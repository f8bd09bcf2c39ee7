"""Typed output with a JSON Schema's keywords, and the value read out of prose: bugs
planted by hand that the first tests let through (tests/plants.toml, module ``output``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import ollm
from ollm.output import extract_json
from ollm_testutils import ScriptedProvider

pytestmark = pytest.mark.anyio


async def _run(reply: str, output: Any) -> Any:
    """The value ``reply`` gives for ``output`` (no correction turn)."""
    provider = ScriptedProvider(reply)
    async with ollm.ChatClient(ollm.Registries(), provider=provider, output_retries=0) as client:
        return await client.run("Give me the value.", output=output)


async def _refused(reply: str, output: Any) -> tuple[str, ...]:
    with pytest.raises(ollm.OutputInvalidError) as raised:
        await _run(reply, output)
    return tuple(raised.value.errors)


PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


async def test_a_required_field_missing_is_refused(anyio_backend: str) -> None:
    assert await _run('{"name": "Ada", "age": 36}', PERSON) == {"name": "Ada", "age": 36}
    (error,) = await _refused('{"name": "Ada"}', PERSON)
    assert "age" in error
    # An optional one may be missing.
    optional = {**PERSON, "required": ["name"]}
    assert await _run('{"name": "Ada"}', optional) == {"name": "Ada"}


async def test_an_enum_takes_only_its_values(anyio_backend: str) -> None:
    colour = {"type": "string", "enum": ["red", "green"]}
    assert await _run('"green"', colour) == "green"
    (error,) = await _refused('"blue"', colour)
    assert error.startswith("$")
    nested = {"type": "object", "properties": {"c": colour}, "required": ["c"]}
    (error,) = await _refused('{"c": "blue"}', nested)
    assert error.startswith("$.c")


NESTED_REF = {
    "type": "object",
    "properties": {"owner": {"$ref": "#/$defs/Person"}},
    "required": ["owner"],
    "$defs": {"Person": PERSON},
}


@pytest.mark.parametrize("key", ["$defs", "definitions"])
async def test_a_nested_ref_is_followed_and_checked(anyio_backend: str, key: str) -> None:
    schema = json.loads(json.dumps(NESTED_REF).replace("$defs", key))
    good = '{"owner": {"name": "Ada", "age": 36}}'
    assert await _run(good, schema) == json.loads(good)
    (error,) = await _refused('{"owner": {"name": "Ada", "age": "old"}}', schema)
    assert error.startswith("$.owner.age")


async def test_a_root_ref_keeps_the_definitions_its_fields_use() -> None:
    # The root is a reference whose own fields refer to another definition: the schema
    # sent to the model must still define it.
    schema = {
        "$ref": "#/$defs/Team",
        "$defs": {
            "Team": {
                "type": "object",
                "properties": {"lead": {"$ref": "#/$defs/Person"}},
                "required": ["lead"],
            },
            "Person": PERSON,
        },
    }
    provider = ScriptedProvider('{"lead": {"name": "Ada", "age": 36}}')
    async with ollm.ChatClient(ollm.Registries(), provider=provider) as client:
        await client.run("Give me the team.", output=schema)
    sent = provider.requests[0].response_format
    assert sent is not None
    assert sent["properties"]["lead"] == {"$ref": "#/$defs/Person"}
    assert sent["$defs"]["Person"] == PERSON


async def test_additional_properties_false_refuses_an_unknown_field(anyio_backend: str) -> None:
    closed = {**PERSON, "additionalProperties": False}
    (error,) = await _refused('{"name": "Ada", "age": 36, "admin": true}', closed)
    assert "admin" in error
    # Without it, an unknown field is let through.
    assert await _run('{"name": "Ada", "age": 36, "admin": true}', PERSON) == {
        "name": "Ada",
        "age": 36,
        "admin": True,
    }


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        # Prose, then a nested object: from its first { to its last }.
        ('Here it is: {"a": {"b": 1}, "c": 2} Enjoy.', '{"a": {"b": 1}, "c": 2}'),
        # An object holding an array: the object, not the array inside it.
        ('The value: {"items": [1, 2]}', '{"items": [1, 2]}'),
        # A fenced value wins over braces in the prose around it.
        (
            'I use {braces} in prose.\n```json\n{"a": 1}\n```\nHope {this} helps.',
            '{"a": 1}',
        ),
        # An array with objects in it.
        ('Sure: [{"a": 1}, {"a": 2}] done', '[{"a": 1}, {"a": 2}]'),
    ],
)
def test_the_value_is_read_out_of_prose(reply: str, value: str) -> None:
    assert extract_json(reply) == value


async def test_a_value_in_prose_comes_back_through_a_chat(anyio_backend: str) -> None:
    reply = 'Of course! {"name": "Ada", "age": 36, "tags": {"x": [1]}} There you go.'
    schema = {**PERSON, "properties": {**PERSON["properties"], "tags": {"type": "object"}}}
    assert await _run(reply, schema) == {"name": "Ada", "age": 36, "tags": {"x": [1]}}
