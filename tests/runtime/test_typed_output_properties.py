"""Properties of typed output, through ``ChatClient.run(output=...)`` on a scripted
provider (asyncio and trio): for random types of the supported set (structs,
dataclasses, TypedDicts, Literals, enums, lists, and the JSON Schema of each) and random
values of them, the value written as the model's reply comes back equal; a value with a
wrong field is refused with the field's path. And the partial reader, on random JSON
cut anywhere, ends with the value itself."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, Literal, TypedDict

import anyio
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ollm
from ollm.output.partial import PartialJSON
from ollm_testutils import Reply, ScriptedProvider

BACKENDS = ("asyncio", "trio")


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


Typed = tuple[Any, st.SearchStrategy[Any]]

LEAVES: list[Typed] = [
    (int, st.integers(-(2**53), 2**53)),
    (float, st.floats(allow_nan=False, allow_infinity=False)),
    (str, st.text(max_size=20)),
    (bool, st.booleans()),
    (Literal["a", "b c"], st.sampled_from(["a", "b c"])),
    (Color, st.sampled_from(list(Color))),
]
_count = iter(range(10**9))


def _struct(fields: list[Typed]) -> Typed:
    kind = msgspec.defstruct(f"S{next(_count)}", [(f"f{i}", t) for i, (t, _) in enumerate(fields)])
    return kind, st.tuples(*(v for _, v in fields)).map(lambda values: kind(*values))


def _dataclass(fields: list[Typed]) -> Typed:
    kind = dataclasses.make_dataclass(
        f"D{next(_count)}", [(f"f{i}", t) for i, (t, _) in enumerate(fields)]
    )
    return kind, st.tuples(*(v for _, v in fields)).map(lambda values: kind(*values))


def _typeddict(fields: list[Typed]) -> Typed:
    kind: Any = TypedDict(  # type: ignore[operator]
        f"T{next(_count)}", {f"f{i}": t for i, (t, _) in enumerate(fields)}
    )
    return kind, st.tuples(*(v for _, v in fields)).map(
        lambda values: {f"f{i}": v for i, v in enumerate(values)}
    )


def _extend(children: st.SearchStrategy[Typed]) -> st.SearchStrategy[Typed]:
    fields = st.lists(children, min_size=1, max_size=4)
    return st.one_of(
        children.map(lambda tv: (list[tv[0]], st.lists(tv[1], max_size=3))),  # type: ignore[name-defined]
        fields.map(_struct),
        fields.map(_dataclass),
        fields.map(_typeddict),
    )


TYPES = st.recursive(st.sampled_from(LEAVES), _extend, max_leaves=8)
OBJECTS = st.lists(TYPES, min_size=1, max_size=4).map(_struct)


def run_output(reply: str, output: Any, backend: str, **settings: Any) -> Any:
    async def go() -> Any:
        provider = ScriptedProvider(Reply([reply[: len(reply) // 2], reply[len(reply) // 2 :]]))
        async with ollm.ChatClient(ollm.Registries(), provider=provider, **settings) as client:
            return await client.run("Give me the value.", output=output)

    return anyio.run(go, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data(), typed=TYPES)
def test_a_valid_value_written_as_the_reply_comes_back_equal(
    backend: str, data: st.DataObject, typed: Typed
) -> None:
    kind, values = typed
    value = data.draw(values)
    reply = msgspec.json.encode(value).decode()
    assert run_output(reply, kind, backend) == value
    # The same type as its JSON Schema: the value is the decoded JSON.
    schema = msgspec.json.schema(kind)
    assert run_output(reply, schema, backend) == json.loads(reply)


WRONG = {"a string": 12345, "not a string": "not a value of this type"}


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data(), typed=OBJECTS)
def test_a_wrong_field_is_refused_with_its_path(
    backend: str, data: st.DataObject, typed: Typed
) -> None:
    kind, values = typed
    reply = msgspec.to_builtins(data.draw(values))
    field_type = msgspec.structs.fields(kind)[0].type
    reply["f0"] = WRONG["a string" if field_type is str else "not a string"]
    for output in (kind, msgspec.json.schema(kind)):
        with pytest.raises(ollm.OutputInvalidError) as raised:
            run_output(json.dumps(reply), output, backend, output_retries=0)
        (error,) = raised.value.errors
        assert error.startswith("$.f0"), error
        assert raised.value.raw == json.dumps(reply)


# Strings that look like the places where elements end (the reader must not cut there).
TRICKY = st.sampled_from(['", {"', "}, {", '"], ["', ", ", '\\", "', "{[", "]}"])
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | TRICKY,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(
    value=st.lists(JSON, max_size=4)
    | st.dictionaries(st.text(max_size=5), JSON, max_size=4)
    # Long enough to be read in bulk (many elements in one msgspec call).
    | st.lists(JSON, min_size=20, max_size=60)
    | st.dictionaries(st.text(max_size=5) | TRICKY, JSON, min_size=20, max_size=40),
    indent=st.booleans(),
    cuts=st.lists(st.integers(min_value=0), max_size=30),
)
def test_the_partial_reader_ends_with_the_value_however_the_text_is_cut(
    value: Any, indent: bool, cuts: list[int]
) -> None:
    text = json.dumps(value, indent=2 if indent else None)
    reply = f"Here it is:\n```json\n{text}\n```"
    points = sorted({c % (len(reply) + 1) for c in cuts})
    reader = PartialJSON()
    for start, end in zip([0, *points], [*points, len(reply)], strict=True):
        reader.feed(reply[start:end])
    reader.flush()
    assert not reader.stopped
    assert reader.done
    assert reader.value == value


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_long_reply_in_tiny_pieces_shows_a_logarithmic_number_of_partial_values(
    backend: str,
) -> None:
    count = 10_000
    pieces = ["[", *(f"{i}," for i in range(count - 1)), f"{count - 1}]"]

    async def go() -> tuple[list[int], Any]:
        provider = ScriptedProvider(Reply(pieces))
        shown: list[int] = []
        value = None
        async with ollm.ChatClient(ollm.Registries(), provider=provider) as client:
            async for event in client.chat("Count.", output=list[int]):
                if isinstance(event, ollm.PartialOutputEvent):
                    shown.append(len(event.value))
                elif isinstance(event, ollm.OutputEvent):
                    value = event.value
        return shown, value

    shown, value = anyio.run(go, backend=backend)
    assert value == list(range(count))
    # Batches of 1/16 of the pieces so far: about 16 ln(n / 16) + 16 of them, not n.
    assert 20 <= len(shown) <= 200, len(shown)
    assert shown == sorted(shown)
    assert shown[-1] > count * 8 // 10


def test_a_changed_schema_is_not_the_next_chats() -> None:
    from ollm.output.schema import OutputType

    class Dog(msgspec.Struct):
        name: str

    first = OutputType(Dog)
    first.schema["properties"]["name"]["type"] = "integer"
    assert OutputType(Dog).schema["properties"]["name"] == {"type": "string"}
