"""Internal: the next token, sampled as llama.cpp's own ``common_sampler`` does, so that
a grammar costs almost nothing.

llama-cpp-python's ``Llama.generate`` puts the grammar into its sampler chain before
top-k: at every token llama.cpp checks each of the vocabulary's entries against the
grammar (262,144 with Gemma 3: about a second a token). llama.cpp's ``common_sampler``
samples with the ordinary chain first and checks only the chosen token; only when the
grammar rejects it is the grammar applied to every candidate and the token sampled
again. The result is the same token whenever the grammar allows the chain's choice
(greedy: always the same token), at the cost of one check. Greedy, a rejected choice is
replaced by the best candidate the grammar allows, looked for in order among the best
few (the token the whole-vocabulary pass would choose), before that pass.

Built on llama-cpp-python's public low-level bindings (``llama_cpp.llama_sampler_*``,
``llama_get_logits_ith``). Runs in the generation thread, like the engine.
"""

from __future__ import annotations

import ctypes
import math
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ollm_llamacpp._engine import Sampling

__all__ = ["CLOSERS", "GrammarError", "TokenSampler"]

# llama.cpp's default root rule (LLAMA_GRAMMAR_DEFAULT_ROOT): the GBNF of a JSON Schema
# starts there.
ROOT = "root"


# A constrained reply that repeats a cycle of at most _PERIOD tokens over its last _LOOP
# tokens is in a loop it cannot leave: inside a JSON string the grammar never makes it
# stop, and a small model writes "2340.000000..." until the reply's bound (minutes).
# The loop is then closed: the grammar's way out (a closing quote, bracket or brace) is
# chosen in place of the next turn of the cycle.
_PERIOD = 8
_LOOP = 48
CLOSERS = ('"', "]", "}")

# Greedy, a rejected token's replacement is looked for among this many best candidates
# before the grammar is applied to the whole vocabulary.
_FEW = 64


class GrammarError(ValueError):
    """llama.cpp could not parse a grammar."""


class TokenSampler:
    """The sampler of one generation: the chain of ``sampling`` and, with ``grammar``
    (GBNF text), the grammar checked against the chain's choice. ``close`` frees it."""

    def __init__(
        self,
        ctx: Any,
        vocab: Any,
        n_vocab: int,
        sampling: Sampling,
        seed: int,
        last_n: int,
        closers: tuple[int, ...] = (),
    ) -> None:
        import llama_cpp
        import numpy as np

        self._lib = llama_cpp
        self._ctx = ctx
        self._n_vocab = n_vocab
        self.chain = _chain(llama_cpp, n_vocab, sampling, seed, last_n)
        self.grammar: Any = None
        self._greedy = sampling.temperature == 0.0
        self.resampled = 0
        # The tokens of the grammar's ways out of a loop (see ``_LOOP``), the last tokens
        # chosen under the grammar, and how many loops were closed.
        self._closers = closers
        self._chosen: deque[int] = deque(maxlen=_LOOP)
        self.loops_closed = 0
        # The candidates: one entry a token, refilled from the logits at each step.
        self._data = (llama_cpp.llama_token_data * n_vocab)()
        self._view = np.ctypeslib.as_array(self._data)
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._np = np
        self._one: Any = llama_cpp.llama_token_data(0, 0.0, 0.0)
        self._one_array: Any = llama_cpp.llama_token_data_array(
            ctypes.pointer(self._one), 1, -1, False
        )
        self._closed = False

    def constrain(self, vocab: Any, grammar: str) -> None:
        """Keep every token to ``grammar`` (GBNF; a ``GrammarError`` if it does not parse)."""
        made = self._lib.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), ROOT.encode())
        if not made:
            raise GrammarError("llama.cpp could not parse the grammar")
        self.grammar = made

    def sample(self) -> int:
        """The next token after the last decoded one: the chain's choice if the grammar
        allows it, else the chain's choice among the tokens the grammar allows; in a
        constrained loop, the grammar's way out of it."""
        token = self._sample()
        if self.grammar is not None and self._loops(token):
            for closer in self._closers:
                if self._allowed(closer):
                    self.loops_closed += 1
                    return closer
        return token

    def _loops(self, token: int) -> bool:
        """Whether ``token`` turns a cycle of at most ``_PERIOD`` tokens that fills the
        last ``_LOOP`` chosen once more."""
        chosen = self._chosen
        if len(chosen) < _LOOP:
            return False
        tail = [*chosen, token]
        return any(
            all(tail[i] == tail[i - period] for i in range(period, len(tail)))
            for period in range(1, _PERIOD + 1)
        )

    def _sample(self) -> int:
        lib = self._lib
        candidates = self._candidates()
        lib.llama_sampler_apply(self.chain, ctypes.byref(candidates))
        token = int(candidates.data[candidates.selected].id)
        if self.grammar is None or self._allowed(token):
            return token
        self.resampled += 1
        if (
            self._greedy
            and candidates.data
            and ctypes.addressof(candidates.data.contents) == ctypes.addressof(self._data)
        ):
            found = self._best_allowed()
            if found is not None:
                return found
        candidates = self._candidates()
        lib.llama_sampler_apply(self.grammar, ctypes.byref(candidates))
        lib.llama_sampler_apply(self.chain, ctypes.byref(candidates))
        return int(candidates.data[candidates.selected].id)

    def accept(self, token: int) -> None:
        """``token`` was chosen: the grammar moves past it, the chain remembers it
        (repetition penalties)."""
        if self.grammar is not None:
            self._lib.llama_sampler_accept(self.grammar, token)
            self._chosen.append(token)
        self._lib.llama_sampler_accept(self.chain, token)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._lib.llama_sampler_free(self.chain)
        if self.grammar is not None:
            self._lib.llama_sampler_free(self.grammar)

    def _best_allowed(self) -> int | None:
        """Greedy: the allowed token of the highest logit among the best ``_FEW`` (ties
        to the lowest id, as the greedy sampler breaks them), or ``None``. The very
        token the grammar applied to every candidate would leave on top, at the cost of
        a few checks."""
        np = self._np
        logits = self._view["logit"]  # as the chain left them (penalised)
        few = min(_FEW, self._n_vocab)
        top = np.argpartition(-logits, few - 1)[:few]
        for token in top[np.lexsort((top, -logits[top]))]:
            if math.isinf(float(logits[token])):
                return None
            if self._allowed(int(token)):
                return int(token)
        return None

    def _allowed(self, token: int) -> bool:
        one = self._one
        one.id, one.logit, one.p = token, 1.0, 0.0
        array = self._one_array
        array.data = ctypes.pointer(one)
        array.size, array.selected, array.sorted = 1, -1, False
        self._lib.llama_sampler_apply(self.grammar, ctypes.byref(array))
        return not math.isinf(float(array.data[0].logit))

    def _candidates(self) -> Any:
        lib, n = self._lib, self._n_vocab
        logits = lib.llama_get_logits_ith(self._ctx, -1)
        view = self._view
        view["id"] = self._ids
        view["logit"] = self._np.ctypeslib.as_array(logits, shape=(n,))
        view["p"] = 0.0
        return lib.llama_token_data_array(
            ctypes.cast(self._data, ctypes.POINTER(lib.llama_token_data)), n, -1, False
        )


def _chain(lib: Any, n_vocab: int, sampling: Sampling, seed: int, last_n: int) -> Any:
    """The samplers llama-cpp-python's ``Llama.generate`` chains, in its order, less
    the grammar."""
    chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
    add = lib.llama_sampler_chain_add
    add(
        chain,
        lib.llama_sampler_init_penalties(
            n_vocab,
            last_n,
            sampling.repeat_penalty,
            sampling.frequency_penalty,
            sampling.presence_penalty,
        ),
    )
    temperature = sampling.temperature
    if temperature == 0.0:
        add(chain, lib.llama_sampler_init_greedy())
    elif temperature < 0.0:
        add(chain, lib.llama_sampler_init_dist(seed))
    else:
        add(chain, lib.llama_sampler_init_top_k(sampling.top_k))
        add(chain, lib.llama_sampler_init_typical(sampling.typical_p, 1))
        add(chain, lib.llama_sampler_init_top_p(sampling.top_p, 1))
        add(chain, lib.llama_sampler_init_min_p(sampling.min_p, 1))
        add(chain, lib.llama_sampler_init_temp(temperature))
        add(chain, lib.llama_sampler_init_dist(seed))
    return chain
