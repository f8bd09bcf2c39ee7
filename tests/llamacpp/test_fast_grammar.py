"""The grammar checked on the chosen token first (llama.cpp's ``common_sampler``), against
llama-cpp-python's ``Llama.generate``, which checks it on the whole vocabulary at every
token: at temperature 0 both must choose the very same tokens, and each reply is a value
of its schema.

A differential test of the engine (the sampler is ollm-llamacpp's own; the oracle is the
library it replaces), on one loaded model, with two schemas to keep the slow side short.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import msgspec
from llama_cpp.llama_grammar import LlamaGrammar

from ollm_llamacpp._engine import Sampling, load_engine
from ollm_llamacpp._gguf import read_gguf
from ollm_llamacpp._grammar import grammar_text

# A reply that keeps to its schema ends well before this.
BOUND = 48

CASES: list[tuple[str, dict[str, Any]]] = [
    (
        "Invent a person.",
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
            "additionalProperties": False,
        },
    ),
    (
        "Pick a colour and say if it is warm.",
        {
            "type": "object",
            "properties": {"colour": {"type": "string"}, "warm": {"type": "boolean"}},
            "required": ["colour", "warm"],
            "additionalProperties": False,
        },
    ),
]


def test_the_fast_grammar_chooses_the_tokens_of_the_full_grammar(model_file: Path) -> None:
    import llama_cpp

    engine = load_engine(
        read_gguf(model_file),
        n_ctx=256,
        threads=2,
        batch_size=256,
        gpu_layers=0,
        embedding=False,
    )
    llama = engine.llama
    vocab = llama_cpp.llama_model_get_vocab(llama.model)
    try:
        for prompt, schema in CASES:
            gbnf = grammar_text(schema)
            tokens = engine.tokenize(
                f"User: {prompt} Answer in JSON.\nAssistant:", special=False, add_bos=True
            )
            texts: list[str] = []
            generation = engine.generate(
                tokens,
                Sampling(temperature=0.0),
                stops=(),
                max_tokens=BOUND,
                stopped=lambda: False,
                emit=texts.append,
                grammar=gbnf,
            )
            assert generation.reason == "stop"  # the grammar ended it, not the bound
            # Every token the reply was made of is in the context, but the end (not read).
            fast = llama.input_ids[len(tokens) : llama.n_tokens].tolist()
            assert len(fast) == generation.completion_tokens

            full: list[int] = []
            for token in llama.generate(
                tokens, temp=0.0, repeat_penalty=1.0, grammar=LlamaGrammar.from_string(gbnf)
            ):
                full.append(token)
                if llama_cpp.llama_vocab_is_eog(vocab, token) or len(full) > BOUND:
                    break
            assert llama_cpp.llama_vocab_is_eog(vocab, full[-1])
            assert fast == full[:-1], prompt

            value = msgspec.json.decode("".join(texts))
            jsonschema.validate(value, schema)
    finally:
        engine.close()
