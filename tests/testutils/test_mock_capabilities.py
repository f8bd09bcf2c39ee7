"""Optional capabilities of the mock providers: model management and embeddings."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ollm
from ollm_testutils import FunctionProvider, Reply, ScriptedProvider
from ollm_testutils.capabilities import MockModels
from ollm_testutils.echo import EchoProvider

pytestmark = pytest.mark.anyio


def test_without_arguments_a_mock_has_neither_capability() -> None:
    providers: list[object] = [ScriptedProvider(), FunctionProvider(lambda r: "x"), EchoProvider()]
    for provider in providers:
        assert not isinstance(provider, ollm.ModelManagement)
        assert not isinstance(provider, ollm.Embeddings)


def test_with_arguments_every_mock_has_them() -> None:
    for provider in (
        ScriptedProvider(models=["a"], embedding_dimensions=4),
        FunctionProvider(lambda r: "x", models=[], embedding_dimensions=4),
        EchoProvider(models=["a"], embedding_dimensions=4),
    ):
        assert isinstance(provider, ollm.ModelManagement)
        assert isinstance(provider, ollm.Embeddings)


async def test_list_show_and_delete() -> None:
    info = ollm.ModelInfo(name="qwen3:8b", family="qwen3")
    provider = ScriptedProvider(models=["llama3.2", info])
    assert [m.name for m in await provider.list_models()] == ["llama3.2", "qwen3:8b"]
    assert await provider.show_model("qwen3:8b") is info
    assert (await provider.show_model("llama3.2:latest")).name == "llama3.2"
    await provider.delete_model("llama3.2")
    assert [m.name for m in await provider.list_models()] == ["qwen3:8b"]
    with pytest.raises(ollm.ModelNotFoundError, match=r"ollm models pull llama3\.2"):
        await provider.show_model("llama3.2")
    with pytest.raises(ollm.ModelNotFoundError):
        await provider.delete_model("llama3.2")
    assert provider.models is not None
    assert provider.models.deleted == ["llama3.2"]


async def test_pull_yields_progress_and_adds_the_model() -> None:
    provider = ScriptedProvider(models=[])
    steps = [step async for step in provider.stream_pull("phi4")]
    assert steps[0].status == "pulling manifest"
    assert steps[-1].status == "success"
    fractions = [s.fraction or 0.0 for s in steps if s.total]
    assert fractions == sorted(fractions)
    assert fractions[-1] == 1.0
    assert [m.name for m in await provider.list_models()] == ["phi4:latest"]
    seen: list[ollm.PullProgress] = []
    await provider.pull_model("mistral", on_progress=seen.append)
    assert len(seen) == len(steps)
    assert seen[-1].status == "success"


async def test_pull_of_a_model_the_registry_lacks() -> None:
    provider = ScriptedProvider(models=MockModels(available=["phi4"]))
    with pytest.raises(ollm.ModelNotFoundError, match="does not exist"):
        await provider.pull_model("nothing")
    await provider.pull_model("phi4")
    assert provider.models is not None
    assert provider.models.pulled == ["phi4"]


async def test_embeddings_are_deterministic_unit_vectors() -> None:
    provider = ScriptedProvider(embedding_dimensions=16)
    result = await provider.embed("m", ["a", "b", "a"])
    assert result.model == "m"
    assert len(result.vectors) == 3
    assert result.vectors[0] == result.vectors[2] != result.vectors[1]
    assert all(len(v) == 16 for v in result.vectors)
    assert result.usage is not None
    assert result.usage.prompt_tokens == 3
    with pytest.raises(TypeError):
        await provider.embed("m", "a")


@given(texts=st.lists(st.text(max_size=30), max_size=5), dims=st.integers(1, 64))
async def test_embedding_vectors_are_l2_normalized(texts: list[str], dims: int) -> None:
    result = await ScriptedProvider(embedding_dimensions=dims).embed("m", texts)
    for vector in result.vectors:
        assert len(vector) == dims
        assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-9)


@given(
    names=st.lists(st.from_regex(r"[a-z][a-z0-9.]{0,8}", fullmatch=True), max_size=4, unique=True)
)
async def test_property_11_a_mock_that_manages_models_offers_all_four(names: list[str]) -> None:
    """Property 11: list, pull, delete and show come together (mock providers)."""
    provider = ScriptedProvider(models=names)
    for method in ("list_models", "show_model", "pull_model", "stream_pull", "delete_model"):
        assert callable(getattr(provider, method))
    listed = {m.name for m in await provider.list_models()}
    assert listed == set(names)
    for name in names:
        assert (await provider.show_model(name)).name == name


async def test_new_reply_helpers() -> None:
    provider = ScriptedProvider(
        Reply.calling(("echo_number", {"a": 1}), text="calling"),
        Reply.slow_first_byte("late", 0.01),
    )
    client = ollm.ChatClient(ollm.Registries(), provider=provider, tools=[echo_number])
    result = await client.run("go")
    assert result.ok
    assert result.text == "late"
    assert [r.result for r in result.tool_results] == ["1"]


def echo_number(a: int) -> str:
    """Echo a.

    Args:
        a: A number.
    """
    return str(a)
