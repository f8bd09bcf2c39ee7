"""Issue 44's check with the real Gemma 3 270M: `--schema 'name, age int'` kept to by the
grammar (the native output strategy) gives a valid value on the first try, for each of
ten fixed prompts, with no correction. (Without the grammar the rate is much lower:
benchmarks/bench_local.py reports it, a test would only pin the model's luck.)"""

from __future__ import annotations

import pytest
from llamacpp_helpers import MODEL, registries_with

import ollm
from ollm.cli.schema import schema_of
from ollm_llamacpp import LlamaCppProvider

pytestmark = pytest.mark.anyio

PROMPTS = [
    "Invent a person.",
    "Who wrote Hamlet, and how old did he live to be?",
    "Describe a child in a story.",
    "Name a famous scientist and their age at death.",
    "Make up a customer for a shop.",
    "Tell me about your neighbour.",
    "Create a character for a novel.",
    "Who is the oldest person you know of?",
    "Give me a person's name and age.",
    "Introduce a new student to the class.",
]


async def test_the_grammar_gives_a_valid_value_on_the_first_try_for_ten_prompts(
    provider: LlamaCppProvider,
) -> None:
    schema = schema_of("name, age int")
    registries = registries_with(provider)
    values = []
    for prompt in PROMPTS:
        client = ollm.ChatClient(
            registries,
            provider="llamacpp",
            model=MODEL,
            output=schema,
            output_strategy="native",
            output_retries=0,
            # A value of two fields is short: a bound that only a runaway reply meets.
            options=ollm.GenerationOptions(temperature=0.0, max_tokens=96),
        )
        async with client.chat(prompt) as stream:
            events = [event async for event in stream]
        assert not [e for e in events if isinstance(e, ollm.ErrorEvent)], prompt
        (value,) = [e.value for e in events if isinstance(e, ollm.OutputEvent)]
        assert isinstance(value, dict)
        assert isinstance(value["name"], str)
        assert isinstance(value["age"], int)
        values.append(value)
        # No correction turn: one request, one reply.
        assert [m.role for m in client.conversation.messages] == ["user", "assistant"]
    assert len(values) == len(PROMPTS)
