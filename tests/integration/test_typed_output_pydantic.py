"""Typed output with a pydantic model (issue 44): ``run(prompt, output=Dog)`` where Dog is
a ``BaseModel``, on the fake servers, on asyncio and trio. The model's own schema goes
to the server, pydantic itself validates the reply (its validators included), and its
errors come back to the model as corrections naming the field."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pydantic_dog import Dog
from typed_fakes import Fake

import ollm

pytestmark = pytest.mark.anyio


async def test_a_pydantic_model_is_the_output_type(fake: Fake) -> None:
    fake.script(fake.text('{"name":"Rex","age":3}'))
    async with fake.client() as client:
        value = await client.run("Invent a dog.", output=Dog)
    assert value == Dog(name="Rex", age=3)
    assert isinstance(value, Dog)
    (body,) = fake.bodies
    constraint = fake.constraint(body)
    schema = constraint["json_schema"]["schema"] if fake.name == "openai" else constraint
    # The model's own schema: pydantic's minimum on age is there.
    assert schema["properties"]["age"].get("minimum") == 0 or fake.name == "gemini"
    assert "name" in schema["properties"]


async def test_pydantics_own_validators_judge_and_correct_the_reply(fake: Fake) -> None:
    fake.script(fake.text('{"name":"rex","age":-1}'), fake.text('{"name":"Rex","age":1}'))
    async with fake.client() as client:
        value = await client.run("Invent a dog.", output=Dog)
    assert value == Dog(name="Rex", age=1)
    correction = fake.last_user_text(fake.bodies[1])
    assert "$.name: value error, the name must start with a capital letter" in correction
    assert "$.age: input should be greater than or equal to 0" in correction


async def test_a_reply_pydantic_refuses_to_the_end_is_output_invalid(fake: Fake) -> None:
    fake.script(fake.text('{"name":"rex","age":1}'))
    async with (
        fake.client(output_retries=0) as client,
        client.chat("Invent a dog.", output=Dog) as stream,
    ):
        events = [event async for event in stream]
    (error,) = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "OUTPUT_INVALID"
    assert "Dog" in error.message
    assert events[-1].reason == "error"  # type: ignore[union-attr]
    # The history stays whole and usable.
    assert client.conversation.messages[-1].text == '{"name":"rex","age":1}'


class LooksLikeAModel:
    """No pydantic at all: any class with the two methods is taken the same way."""

    seen: ClassVar[list[str]] = []

    def __init__(self, data: Any) -> None:
        self.data = data

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        return {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    @classmethod
    def model_validate_json(cls, text: str) -> LooksLikeAModel:
        cls.seen.append(text)
        return cls(text)


async def test_any_class_with_the_two_methods_is_a_model(fake: Fake) -> None:
    fake.script(fake.text('{"n": 7}'))
    async with fake.client() as client:
        value = await client.run("A number.", output=LooksLikeAModel)
    assert isinstance(value, LooksLikeAModel)
    assert LooksLikeAModel.seen[-1] == '{"n": 7}'
