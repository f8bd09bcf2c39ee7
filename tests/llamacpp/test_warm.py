"""Warm conversations (issue 44): a conversation's llama.cpp state is saved after each
reply and a new provider (a new ``ollm chat -c`` process) starts from it; a state of a
changed model file is not used, a changed history never changes the answer, and the
folder keeps to its size limit."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from llamacpp_helpers import MODEL

import ollm
from ollm_llamacpp import LlamaCppProvider

pytestmark = pytest.mark.anyio

HISTORY = (
    ollm.Message.user("Remember this list: apples, pears, plums, cherries, figs and dates."),
    ollm.Message.assistant("I will remember it."),
    ollm.Message.user("Which fruit comes first in the list?"),
)
NEXT = (*HISTORY, ollm.Message.assistant("Apples."), ollm.Message.user("And the last one?"))


def request(messages: tuple[ollm.Message, ...], conversation: str | None) -> ollm.ProviderRequest:
    return ollm.ProviderRequest(
        model=MODEL,
        messages=messages,
        options=ollm.GenerationOptions(temperature=0.0, max_tokens=6),
        conversation_id=conversation,
    )


async def turn(
    models_dir: Path, state: Path | bool, req: ollm.ProviderRequest, model: str = MODEL
) -> tuple[str, ollm.Usage, LlamaCppProvider]:
    """One reply from a fresh provider (as a new process would make it)."""
    req = ollm.ProviderRequest(**{**_fields(req), "model": model})
    async with LlamaCppProvider(
        models_dir=models_dir, threads=2, max_context=1024, state_dir=state
    ) as provider:
        text, usage = "", None
        async for event in provider.chat_stream(req):
            if isinstance(event, ollm.TextEvent):
                text += event.text
            elif isinstance(event, ollm.FinishEvent):
                usage = event.usage
            assert not isinstance(event, ollm.ErrorEvent), event
    assert usage is not None
    return text, usage, provider


def _fields(req: ollm.ProviderRequest) -> dict[str, object]:
    return {name: getattr(req, name) for name in req.__struct_fields__}


async def test_a_new_provider_resumes_a_conversation_warm_with_the_same_answer(
    models_dir: Path, tmp_path: Path
) -> None:
    _, usage, provider = await turn(models_dir, tmp_path, request(HISTORY, "c1"))
    assert provider.states is not None
    assert provider.states.saved == 1
    (saved,) = tmp_path.glob("*.state")

    warm, warm_usage, provider = await turn(models_dir, tmp_path, request(NEXT, "c1"))
    assert provider.states is not None
    assert provider.states.restored == 1
    # The whole earlier prompt was in the state (and the reply's tokens the history
    # repeats): not read again.
    assert warm_usage.cached_tokens is not None
    assert warm_usage.cached_tokens >= usage.prompt_tokens
    cold, cold_usage, _ = await turn(models_dir, False, request(NEXT, "c1"))
    assert cold_usage.cached_tokens is None
    assert warm == cold  # the same answer, at temperature 0
    assert saved.exists()


async def test_a_changed_history_or_another_conversation_never_changes_the_answer(
    models_dir: Path, tmp_path: Path
) -> None:
    _, before, _ = await turn(models_dir, tmp_path, request(HISTORY, "c1"))
    changed = (ollm.Message.user("Remember this list: kiwis, limes and lemons."), *NEXT[1:])
    warm, usage, _ = await turn(models_dir, tmp_path, request(changed, "c1"))
    cold, _, _ = await turn(models_dir, False, request(changed, "c1"))
    assert warm == cold
    # Only the shared beginning (the preamble, up to the changed list) came from the
    # state: not the rest of the earlier prompt.
    assert (usage.cached_tokens or 0) < before.prompt_tokens - 10
    # Another conversation's id never finds this one's state.
    _, other, provider = await turn(models_dir, tmp_path, request(NEXT, "c2"))
    assert provider.states is not None
    assert provider.states.restored == 0
    assert other.cached_tokens is None


async def test_a_state_of_a_changed_model_file_is_not_used(
    models_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    copy = folder / "copy.gguf"
    shutil.copyfile(models_dir / f"{MODEL}.gguf", copy)
    states = tmp_path / "states"
    await turn(folder, states, request(HISTORY, "c1"), model="copy")
    assert len(list(states.glob("*.state"))) == 1
    # The same path, another file (replaced by a newer download, say).
    os.utime(copy, ns=(copy.stat().st_atime_ns, copy.stat().st_mtime_ns + 10**9))
    _, usage, provider = await turn(folder, states, request(NEXT, "c1"), model="copy")
    assert provider.states is not None
    assert provider.states.restored == 0
    assert usage.cached_tokens is None


async def test_the_state_folder_keeps_to_its_limit(models_dir: Path, tmp_path: Path) -> None:
    await turn(models_dir, tmp_path, request(HISTORY, "c1"))
    (first,) = tmp_path.glob("*.state")
    size = first.stat().st_size
    async with LlamaCppProvider(
        models_dir=models_dir, threads=2, max_context=1024, state_dir=tmp_path
    ) as provider:
        assert provider.states is not None
        provider.states.limit = size + size // 2  # room for one state, not two
        async for _ in provider.chat_stream(request(HISTORY, "c2")):
            pass
    (kept,) = tmp_path.glob("*.state")
    assert kept != first  # the least recently used went
