"""Model files that cannot be run are refused in words naming the file, never a crash."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
from cli_helpers import OLLM, ollm_env
from gguf_files import header_only, rewrite_gguf
from llamacpp_helpers import MODEL, registries_with

import ollm
from ollm_llamacpp import GGUFError, LlamaCppProvider, read_gguf

pytestmark = pytest.mark.anyio


async def _chat(provider: LlamaCppProvider, model: str) -> list[ollm.ChatEvent]:
    client = ollm.ChatClient(registries_with(provider), provider="llamacpp", model=model)
    return [
        event async for event in client.chat("Hi", options=ollm.GenerationOptions(max_tokens=4))
    ]


def _error(events: list[ollm.ChatEvent]) -> ollm.ErrorEvent:
    (error,) = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    finish = events[-1]
    assert isinstance(finish, ollm.FinishEvent)
    assert finish.reason == "error"
    return error


def test_the_header_says_what_the_model_is(model_file: Path) -> None:
    info = read_gguf(model_file)
    assert (info.architecture, info.quantization, info.context_length) == (
        "gemma3",
        "Q4_K_M",
        32768,
    )
    assert info.chat_template is None
    assert info.parameter_label == "270M"
    assert info.size_bytes == model_file.stat().st_size


async def test_a_missing_name_lists_the_models_folder(models_dir: Path) -> None:
    async with LlamaCppProvider(models_dir=models_dir) as provider:
        error = _error(await _chat(provider, "llama-9b"))
    assert error.code == "MODEL_NOT_FOUND"
    assert str(models_dir) in error.message
    assert MODEL in error.message


def test_a_missing_file_is_named_by_the_cli(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.gguf"
    result = subprocess.run(
        [OLLM, "chat", "-p", "llamacpp", "-m", str(missing), "Hi"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=ollm_env(OLLM_LLAMACPP_MODELS=str(tmp_path)),
    )
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1].startswith("error[MODEL_NOT_FOUND]: ")
    assert str(missing) in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"<!doctype html><html>Not found</html>", "not with the GGUF magic bytes"),
        (b"ggjt\x01\x00\x00\x00" + b"\0" * 100, "GGML's old format"),
        (b"", "empty"),
    ],
)
async def test_a_file_that_is_not_gguf_is_refused_before_loading(
    tmp_path: Path, content: bytes, said: str
) -> None:
    (tmp_path / "fake.gguf").write_bytes(content)
    async with LlamaCppProvider(models_dir=tmp_path) as provider:
        error = _error(await _chat(provider, "fake"))
    assert error.code == "LLAMACPP_NOT_GGUF"
    assert str(tmp_path / "fake.gguf") in error.message
    assert said in error.message


async def test_a_header_cut_short_is_refused(tmp_path: Path, model_file: Path) -> None:
    (tmp_path / "cut.gguf").write_bytes(model_file.read_bytes()[:100_000])
    async with LlamaCppProvider(models_dir=tmp_path) as provider:
        error = _error(await _chat(provider, "cut"))
    assert error.code == "LLAMACPP_NOT_GGUF"
    assert "cut short" in error.message


def _nested_arrays_gguf(path: Path, depth: int) -> None:
    """A GGUF header whose one key holds arrays of arrays ``depth`` deep, no tensors."""
    u32, u64 = (lambda n: struct.pack("<I", n)), (lambda n: struct.pack("<Q", n))
    key = b"general.deep"
    nested = (u32(9) + u64(1)) * (depth - 1) + u32(0) + u64(0)  # innermost: no uint8
    header = b"GGUF" + u32(3) + u64(0) + u64(1) + u64(len(key)) + key + u32(9) + nested
    path.write_bytes(header)


async def test_metadata_nested_thousands_deep_is_refused_in_words(tmp_path: Path) -> None:
    _nested_arrays_gguf(tmp_path / "deep.gguf", 5000)
    with pytest.raises(GGUFError, match="nests arrays more than 64 deep"):
        read_gguf(tmp_path / "deep.gguf")
    async with LlamaCppProvider(models_dir=tmp_path) as provider:
        error = _error(await _chat(provider, "deep"))
    assert error.code == "LLAMACPP_NOT_GGUF"
    assert "nests arrays" in error.message
    # A real model's nesting (an array of arrays) still reads.
    _nested_arrays_gguf(tmp_path / "two.gguf", 2)
    assert read_gguf(tmp_path / "two.gguf").metadata == {"general.deep": 1}


async def test_an_architecture_llama_cpp_does_not_know(tmp_path: Path, model_file: Path) -> None:
    rewrite_gguf(model_file, tmp_path / "odd.gguf", {"general.architecture": "ollm-test-arch"})
    async with LlamaCppProvider(models_dir=tmp_path) as provider:
        error = _error(await _chat(provider, "odd"))
    assert error.code == "LLAMACPP_UNSUPPORTED_ARCHITECTURE"
    assert "'ollm-test-arch'" in error.message
    assert str(tmp_path / "odd.gguf") in error.message


async def test_a_model_larger_than_the_memory_is_refused_before_loading(
    tmp_path: Path, model_file: Path
) -> None:
    # A terabyte, sparse: its header is the real model's, its size more than any RAM here.
    header_only(model_file, tmp_path / "huge.gguf", 1 << 40)
    async with LlamaCppProvider(models_dir=tmp_path) as provider:
        error = _error(await _chat(provider, "huge"))
        assert await provider.running_models() == []
    assert error.code == "LLAMACPP_MODEL_TOO_LARGE"
    assert str(tmp_path / "huge.gguf") in error.message
    assert "available" in error.message


async def test_the_tool_strategy_follows_the_template(tmp_path: Path, model_file: Path) -> None:
    """A chat template without tools: json-react (a chat model keeps to JSON steps, the
    grammar makes them parse); no template (a base model): ReAct with a worked example."""
    template = (
        "{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n"
        "{% endfor %}<start_of_turn>model\n"
    )
    rewrite_gguf(model_file, tmp_path / "chat.gguf", {"tokenizer.chat_template": template})
    header_only(model_file, tmp_path / "base.gguf", model_file.stat().st_size)
    async with LlamaCppProvider(models_dir=tmp_path) as provider:
        chat = await provider.model_capabilities("chat")
        base = await provider.model_capabilities("base")
    assert (chat.tools, chat.tool_strategy, chat.fallback_tool_strategy) == (
        False,
        "json-react",
        "react-example",
    )
    assert (base.tools, base.tool_strategy, base.fallback_tool_strategy) == (
        False,
        "react-example",
        None,
    )


async def test_a_chat_template_in_the_file_is_used_and_takes_tools(
    tmp_path: Path, model_file: Path
) -> None:
    template = (
        "{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n"
        "{% endfor %}{% if tools %}TOOLS {{ tools | map(attribute='function.name') | join(',') }}"
        "\n{% endif %}<start_of_turn>model\n"
    )
    rewrite_gguf(model_file, tmp_path / "chat.gguf", {"tokenizer.chat_template": template})
    async with LlamaCppProvider(models_dir=tmp_path) as provider:
        capabilities = await provider.model_capabilities("chat")
        assert (capabilities.tools, capabilities.tool_strategy) == (True, None)
        plain = ollm.ProviderRequest(model="chat", messages=(ollm.Message.user("Hi"),))
        tools = ollm.ProviderRequest(
            model="chat",
            messages=(ollm.Message.user("Hi"),),
            tools=(ollm.ToolSchema("calculate"),),
        )
        # Counted as the template renders them: the tools line adds tokens.
        assert await provider.count_tokens(tools) > await provider.count_tokens(plain)
        events = await _chat(provider, "chat")
    assert not [e for e in events if isinstance(e, ollm.NoticeEvent) and "template" in e.message]
    assert isinstance(events[-1], ollm.FinishEvent)


async def test_a_template_that_refuses_the_conversation(tmp_path: Path, model_file: Path) -> None:
    template = "{{ raise_exception('Conversation roles must alternate') }}"
    rewrite_gguf(model_file, tmp_path / "strict.gguf", {"tokenizer.chat_template": template})
    async with LlamaCppProvider(models_dir=tmp_path) as provider:
        error = _error(await _chat(provider, "strict"))
    assert error.code == "LLAMACPP_TEMPLATE_FAILED"
    assert "Conversation roles must alternate" in error.message


async def test_embeddings_of_a_text_model_are_unsupported(provider: LlamaCppProvider) -> None:
    with pytest.raises(ollm.CapabilityError) as raised:
        await provider.embed(MODEL, ["hello"])
    assert raised.value.code == "UNSUPPORTED"
    assert "embedding model" in raised.value.message


async def test_an_unknown_option_is_named(provider: LlamaCppProvider) -> None:
    request = ollm.ProviderRequest(
        model=MODEL,
        messages=(ollm.Message.user("Hi"),),
        options=ollm.GenerationOptions(extra={"mirostat": 2}),
    )
    events = [e async for e in provider.chat_stream(request)]
    assert isinstance(events[-1], ollm.ErrorEvent)
    assert events[-1].code == "INVALID_REQUEST"
    assert "'mirostat'" in events[-1].message
