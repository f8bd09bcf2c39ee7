"""ollm-llamacpp without its real model: prompts, GGUF headers written by hand, settings
and model names (tests/plants.toml, module ``llamacpp``: the real-model tests caught
none of the bugs planted here)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from llamacpp_helpers import registries_with

import ollm
from ollm_llamacpp import LlamaCppConfig, LlamaCppProvider, read_gguf
from ollm_llamacpp._format import TRANSCRIPT_STOPS, template_prompt, transcript_prompt

# GGUF value types (ggml's docs/gguf.md).
_UINT32, _STRING = 4, 8


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def write_gguf(
    path: Path, metadata: dict[str, str | int], tensors: dict[str, list[int]] | None = None
) -> Path:
    """A GGUF v3 header (no tensor data): string and uint32 values, tensors' shapes."""
    tensors = tensors or {}
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
    for key, value in metadata.items():
        out += _string(key)
        if isinstance(value, str):
            out += struct.pack("<I", _STRING) + _string(value)
        else:
            out += struct.pack("<II", _UINT32, value)
    for name, shape in tensors.items():
        out += _string(name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", size) for size in shape)
        out += struct.pack("<IQ", 0, 0)  # its type, its offset
    path.write_bytes(bytes(out))
    return path


def test_the_header_gives_the_architectures_context_and_counts_parameters(
    tmp_path: Path,
) -> None:
    path = write_gguf(
        tmp_path / "tiny.gguf",
        {
            "general.architecture": "llama",
            "general.name": "Tiny",
            "general.context_length": 99,  # not where the context length is read from
            "llama.context_length": 4096,
        },
        {"token_embd.weight": [64, 1000], "output.weight": [64, 1000, 2]},
    )
    info = read_gguf(path)
    assert info.architecture == "llama"
    assert info.name == "Tiny"
    assert info.context_length == 4096
    assert info.parameters == 64 * 1000 + 64 * 1000 * 2
    assert info.parameter_label == "192K"


def _request(*messages: ollm.Message, **kwargs: object) -> ollm.ProviderRequest:
    return ollm.ProviderRequest("m", messages, **kwargs)  # type: ignore[arg-type]


def test_a_transcript_stops_at_the_next_turn_and_at_the_requests_own_stops() -> None:
    prompt = transcript_prompt(
        _request(ollm.Message.user("Hi"), options=ollm.GenerationOptions(stop=["END"]))
    )
    assert prompt.stops == (*TRANSCRIPT_STOPS, "END")
    assert prompt.text == "User: Hi\nAssistant:"


def test_a_transcript_writes_the_calls_and_their_results() -> None:
    call = ollm.ToolCall("c1", "fetch", {"url": "https://example.org/é"})
    prompt = transcript_prompt(
        _request(
            ollm.Message.user("Read it"),
            ollm.Message.assistant("", tool_calls=(call,)),
            ollm.Message.tool("the page", call=call),
            system_prompt="You are terse.",
        )
    )
    assert prompt.text == (
        "You are terse.\n\n"
        "User: Read it\n"
        'Assistant: [fetch({"url": "https://example.org/é"})]\n'
        "Tool (fetch): the page\n"
        "Assistant:"
    )


# A template that refuses a system message, as some models' do.
NO_SYSTEM = (
    "{% for m in messages %}"
    "{% if m.role == 'system' %}{{ raise_exception('no system role') }}{% endif %}"
    "<{{ m.role }}>{{ m.content }}</{{ m.role }}>"
    "{% endfor %}"
)


def test_a_refused_system_prompt_goes_to_the_top_of_the_first_user_message() -> None:
    pytest.importorskip("llama_cpp")
    request = _request(
        ollm.Message.user("first"),
        ollm.Message.assistant("answer"),
        ollm.Message.user("second"),
        system_prompt="Be brief.",
    )
    prompt = template_prompt(NO_SYSTEM, request, bos="", eos="", model="m")
    assert prompt.text == (
        "<user>Be brief.\n\nfirst</user><assistant>answer</assistant><user>second</user>"
    )


def _resolve(environ: dict[str, str], **given: object) -> LlamaCppConfig:
    settings: dict[str, object] = dict.fromkeys(
        ("models_dir", "model", "threads", "max_context", "gpu_layers", "batch_size"), None
    )
    settings["memory_check"] = None
    settings.update(given)
    return LlamaCppConfig.resolve(environ=environ, **settings)  # type: ignore[arg-type]


def test_arguments_win_over_the_environment() -> None:
    environ = {
        "OLLM_LLAMACPP_THREADS": "5",
        "OLLM_LLAMACPP_MAX_CONTEXT": "1024",
        "OLLM_LLAMACPP_GPU_LAYERS": "7",
    }
    given = _resolve(environ, threads=3, max_context=2048, gpu_layers=-1)
    assert (given.threads, given.max_context, given.gpu_layers) == (3, 2048, -1)
    read = _resolve(environ)
    assert (read.threads, read.max_context, read.gpu_layers) == (5, 1024, 7)


@pytest.mark.parametrize(("value", "check"), [("off", False), (" NO ", False), ("1", True)])
def test_the_memory_check_is_read_from_the_environment(value: str, check: bool) -> None:
    assert _resolve({"OLLM_LLAMACPP_MEMORY_CHECK": value}).memory_check is check
    assert _resolve({"OLLM_LLAMACPP_MEMORY_CHECK": value}, memory_check=True).memory_check


def test_conversation_states_go_beside_the_log_and_nowhere_when_it_is_off(
    tmp_path: Path,
) -> None:
    log = tmp_path / "logs" / "logs.db"
    assert _resolve({"OLLM_LOGS_PATH": str(log)}).state_dir == log.parent / "llamacpp-state"
    # A chat kept out of the log (OLLM_LOGS=off, `ollm chat --no-log`) is kept off the disk.
    assert _resolve({"OLLM_LOGS_PATH": str(log), "OLLM_LOGS": "off"}).state_dir is None
    # Said outright, a folder wins.
    chosen = {"OLLM_LOGS": "off", "OLLM_LLAMACPP_STATE_CACHE": str(tmp_path / "s")}
    assert _resolve(chosen).state_dir == tmp_path / "s"
    assert _resolve({"OLLM_LLAMACPP_STATE_CACHE": "off"}).state_dir is None
    assert _resolve({"OLLM_LOGS": "off"}, state_dir=tmp_path).state_dir == tmp_path


@pytest.mark.anyio
async def test_a_name_that_starts_two_models_names_both(anyio_backend: str, tmp_path: Path) -> None:
    for name in ("qwen-small", "qwen-large"):
        write_gguf(tmp_path / f"{name}.gguf", {"general.architecture": "qwen2"})
    async with LlamaCppProvider(models_dir=tmp_path, memory_check=False) as provider:
        client = ollm.ChatClient(registries_with(provider), provider="llamacpp", model="qwen")
        events = [event async for event in client.chat("Hi")]
    (error,) = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "MODEL_NOT_FOUND"
    assert "could be any of: qwen-large, qwen-small" in error.message


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"name": {"type": "string"}}},
        {"type": "object", "properties": {"thought": {"type": "string", "maxLength": 12}}},
        {"type": "array", "items": {"type": "string", "minLength": 1}},
    ],
)
def test_a_grammar_keeps_control_characters_out_of_strings_as_json_does(
    schema: dict[str, object],
) -> None:
    """llama-cpp-python's converter lets a string hold a raw newline: the reply is then
    no JSON, and in a base model's transcript a newline and "User:" inside the string
    ended the reply at the transcript's stop (Gemma 3 270M did, in a json-react step)."""
    from llama_cpp import llama_grammar

    from ollm_llamacpp._grammar import grammar_text

    grammar = grammar_text(schema)
    rules = [line for line in grammar.splitlines() if line.startswith("char ::=")]
    assert rules
    for rule in rules:
        assert rule.startswith('char ::= [^"\\\\\\x7F\\x00-\\x1F] |'), rule
    llama_grammar.LlamaGrammar.from_string(grammar, verbose=False)  # it still parses
