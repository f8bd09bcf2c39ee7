"""A pydantic model as typed output's tests use it: its own schema, a bound pydantic
checks (``age >= 0``) and a validator of its own (a capitalised name)."""

from __future__ import annotations

import pydantic


class Dog(pydantic.BaseModel):
    name: str
    age: int = pydantic.Field(ge=0)

    @pydantic.field_validator("name")
    @classmethod
    def capitalised(cls, value: str) -> str:
        if not value[:1].isupper():
            raise ValueError("the name must start with a capital letter")
        return value
