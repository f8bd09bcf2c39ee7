"""Internal: llama.cpp through llama-cpp-python, in a worker thread: load, generate, embed.

Everything here blocks, and runs in a thread the provider starts (never on the event
loop). llama-cpp-python is imported only here, on the first load.

Loading: llama-cpp-python's quiet mode sends the whole process's stdout and stderr to
``/dev/null`` while a model loads (file descriptors 1 and 2, in every thread), which
would swallow what the rest of the program prints meanwhile. So it loads in verbose
mode, with llama.cpp's log routed to the Python logger "ollm_llamacpp.llama_cpp"
(debug level) and llama-cpp-python's own messages, which it prints to ``sys.stderr``
while loading, sent there too. What llama.cpp said during a failed load becomes the
error message.
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import io
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ollm.errors import InvalidRequestError, OllmError
from ollm_llamacpp._errors import PROVIDER, LlamaCppErrorCode, model_error
from ollm_llamacpp._gguf import GGUFInfo
from ollm_llamacpp._sampler import CLOSERS, GrammarError, TokenSampler

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = ["Engine", "Generation", "Sampling", "StopScanner", "common_prefix", "load_engine"]

log = logging.getLogger(__name__)
llama_log = logging.getLogger("ollm_llamacpp.llama_cpp")

# One load at a time: sys.stderr is redirected while a load runs.
_LOAD_LOCK = threading.Lock()
# What llama.cpp logs, while a load runs in this thread (errors become its message).
_captured = threading.local()
_log_callback: Any = None


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen (llama-cpp-python's defaults where ``None``)."""

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    typical_p: float = 1.0
    repeat_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None


FinishReason = Literal["stop", "length", "cancelled"]


@dataclass(frozen=True)
class Generation:
    """How one generation went: why it ended, its tokens and its timings."""

    reason: FinishReason
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    prompt_ns: int
    eval_ns: int
    # How many loops a grammar's way out closed (``TokenSampler``).
    loops_closed: int = 0


class StopScanner:
    """Text as it may be shown: everything before the first stop string, never a stop.

    The end of the text that could still become a stop string is held back until the
    next piece decides it.
    """

    __slots__ = ("held", "stops")

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(dict.fromkeys(s for s in stops if s))
        self.held = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """The text to show now, and whether a stop string was reached."""
        text = self.held + text
        hits = [found for found in (text.find(stop) for stop in self.stops) if found >= 0]
        if hits:
            self.held = ""
            return text[: min(hits)], True
        keep = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(text)), keep, -1):
                if stop.startswith(text[-size:]):
                    keep = size
                    break
        self.held = text[len(text) - keep :]
        return text[: len(text) - keep], False


def _on_log(level: int, text: bytes, _data: ctypes.c_void_p) -> None:
    message = text.decode("utf-8", "replace")
    lines = getattr(_captured, "lines", None)
    if lines is not None:
        lines.append(message)
    llama_log.debug("%s", message.rstrip("\n"))


def _route_llama_log() -> None:
    """Send llama.cpp's log to Python logging (once per process)."""
    global _log_callback
    if _log_callback is not None:
        return
    import llama_cpp

    _log_callback = llama_cpp.llama_log_callback(_on_log)
    llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))


class _ToLog(io.TextIOBase):
    """llama-cpp-python's prints while loading, as debug lines of the log."""

    def write(self, text: str) -> int:
        if text.strip():
            llama_log.debug("%s", text.rstrip("\n"))
        return len(text)


@contextlib.contextmanager
def _capture() -> Iterator[list[str]]:
    lines: list[str] = []
    _captured.lines = lines
    try:
        yield lines
    finally:
        _captured.lines = None


def load_engine(
    info: GGUFInfo,
    *,
    n_ctx: int,
    threads: int,
    batch_size: int,
    gpu_layers: int,
    embedding: bool,
    vocab_only: bool = False,
) -> Engine:
    """Load the model of ``info`` (an ``OllmError`` that names the file if it fails);
    ``vocab_only``: its tokenizer alone."""
    try:
        import llama_cpp
    except ImportError as exc:  # a broken build of the library
        raise model_error(
            f"llama-cpp-python cannot be imported ({exc}). Reinstall it: "
            "pip install --force-reinstall --no-cache-dir llama-cpp-python",
            LlamaCppErrorCode.LOAD_FAILED,
        ) from None
    started = time.perf_counter_ns()
    with _LOAD_LOCK, _capture() as said, contextlib.redirect_stderr(_ToLog()):
        _route_llama_log()
        try:
            llama = llama_cpp.Llama(
                model_path=info.path,
                n_ctx=n_ctx,
                n_batch=min(batch_size, n_ctx),
                n_threads=threads,
                n_threads_batch=threads,
                n_gpu_layers=gpu_layers,
                embedding=embedding,
                vocab_only=vocab_only,
                verbose=True,  # see the module's docstring: quiet mode silences the process
            )
        except (ValueError, RuntimeError, OSError, MemoryError) as exc:
            raise _load_error(info, exc, said, n_ctx) from None
    llama.verbose = False
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
    return Engine(llama, info, time.perf_counter_ns() - started)


def _load_error(info: GGUFInfo, exc: BaseException, said: list[str], n_ctx: int) -> OllmError:
    name = info.path
    errors = [line.strip() for line in said if "error" in line.lower() or "failed" in line]
    text = " ".join(said)
    if "unknown model architecture" in text:
        import llama_cpp

        return model_error(
            f"{name}: the llama.cpp of llama-cpp-python {llama_cpp.__version__} cannot load "
            f"models of the architecture {info.architecture!r}. Upgrade it (pip install -U "
            "llama-cpp-python), or choose a model of an architecture it knows.",
            LlamaCppErrorCode.UNSUPPORTED_ARCHITECTURE,
            model=name,
        )
    if isinstance(exc, MemoryError) or "failed to allocate" in text or "alloc" in str(exc):
        return model_error(
            f"{name}: llama.cpp could not allocate the memory for the model and a context of "
            f"{n_ctx} tokens. Lower the context (OLLM_LLAMACPP_MAX_CONTEXT), or close "
            "programs that use memory.",
            LlamaCppErrorCode.MODEL_TOO_LARGE,
            model=name,
        )
    detail = errors[-1] if errors else str(exc)
    return model_error(
        f"{name}: llama.cpp could not load it ({detail.rstrip('.')}). The file may be "
        "damaged or incomplete: download it again.",
        LlamaCppErrorCode.LOAD_FAILED,
        model=name,
    )


class Engine:
    """A loaded model: tokenizes, generates (``generate``) and embeds. Not thread-safe:
    one call at a time (the provider holds its lock around each)."""

    def __init__(self, llama: Llama, info: GGUFInfo, load_ns: int) -> None:
        import llama_cpp

        self.llama = llama
        self.info = info
        self.load_ns = load_ns
        self.n_ctx = llama.n_ctx()
        self._vocab = llama_cpp.llama_model_get_vocab(llama.model)
        self._n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        self._is_eog = llama_cpp.llama_vocab_is_eog
        self._default_seed = llama_cpp.LLAMA_DEFAULT_SEED
        # The single tokens that close a JSON string, array or object (a constrained
        # loop's ways out, see ``TokenSampler``).
        self._closers = tuple(
            ids[0]
            for ids in (self.tokenize(closer, special=False, add_bos=False) for closer in CLOSERS)
            if len(ids) == 1
        )
        bos, eos = llama.token_bos(), llama.token_eos()
        self.bos_text = self._token_text(bos)
        self.eos_text = self._token_text(eos)

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llama.detokenize([token], special=True).decode("utf-8", "replace")

    def tokenize(self, text: str, *, special: bool, add_bos: bool) -> list[int]:
        """The tokens of ``text`` (``special``: control tokens written in it count)."""
        return self.llama.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)

    def generate(
        self,
        tokens: list[int],
        sampling: Sampling,
        *,
        stops: Sequence[str],
        max_tokens: int | None,
        stopped: Callable[[], bool],
        emit: Callable[[str], None],
        lstrip: bool = False,
        grammar: str | None = None,
    ) -> Generation:
        """Generate after ``tokens``, handing each piece of text to ``emit``.

        Ends at an end-of-generation token, a stop string (not shown), ``max_tokens``,
        the end of the context, or when ``stopped()`` says so, which is asked after
        every token. ``lstrip``: the reply's leading blanks are not shown (after a
        transcript's ``Assistant:``). ``grammar``: the GBNF every sampled token must
        keep to (a JSON Schema's), or ``None``.
        """
        llama = self.llama
        room = self.n_ctx - len(tokens)
        limit = room if max_tokens is None else min(max_tokens, room)
        cached = common_prefix(llama.input_ids[: llama.n_tokens].tolist(), tokens)
        scanner = StopScanner(stops)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        detokenize, is_eog, vocab = llama.detokenize, self._is_eog, self._vocab
        count = 0
        reason: FinishReason = "length"
        started = time.perf_counter_ns()
        first = started
        if stopped():
            return Generation("cancelled", len(tokens), cached, 0, 0, 0)
        seed = self._default_seed if sampling.seed is None else sampling.seed
        sampler = TokenSampler(
            llama.ctx,
            self._vocab,
            self._n_vocab,
            sampling,
            seed,
            llama.last_n_tokens_size,
            self._closers,
        )
        steps = self._steps(tokens, cached, sampler, grammar)
        try:
            for token in steps if limit > 0 else ():
                if count == 0:
                    first = time.perf_counter_ns()
                if is_eog(vocab, token):
                    reason = "stop"
                    break
                count += 1
                text = decoder.decode(detokenize([token]))
                if lstrip and text:
                    text = text.lstrip()
                    lstrip = not text
                if text:
                    shown, hit = scanner.feed(text)
                    if shown:
                        emit(shown)
                    if hit:
                        reason = "stop"
                        break
                if count >= limit:
                    break
                if stopped():
                    reason = "cancelled"
                    break
        finally:
            steps.close()
            sampler.close()
        # What was held back as a possible stop string was not one.
        rest = scanner.held + decoder.decode(b"", final=True)
        if rest:
            emit(rest)
        ended = time.perf_counter_ns()
        return Generation(
            reason,
            len(tokens),
            cached,
            count,
            first - started,
            ended - first,
            sampler.loops_closed,
        )

    def _steps(
        self, tokens: list[int], cached: int, sampler: TokenSampler, grammar: str | None
    ) -> Generator[int, None, None]:
        """The tokens after ``tokens`` (of which the context holds the first ``cached``),
        one at a time; each is decoded only when the
        next is asked for (a token the caller stops at stays out of the context, as
        with llama-cpp-python's ``generate``).

        Not ``Llama.generate``: its sampler checks a grammar against the whole
        vocabulary at every token; ``TokenSampler`` checks the chosen token first.
        """
        llama = self.llama
        if grammar is not None:
            try:
                sampler.constrain(self._vocab, grammar)
            except GrammarError as exc:
                raise InvalidRequestError(
                    f"{exc}: the request's response_format cannot constrain the "
                    "reply. Simplify its JSON Schema, or ask without it.",
                    provider=PROVIDER,
                ) from None
        llama.eval(self._unread(tokens, cached))
        while True:
            token = sampler.sample()
            sampler.accept(token)
            yield token
            llama.eval([token])

    def _unread(self, tokens: list[int], cached: int) -> list[int]:
        """What of ``tokens`` the context must still read: all after the ``cached`` prefix
        it holds, and at least the last token (its logits are the ones sampled from)."""
        import llama_cpp

        llama = self.llama
        reuse = min(cached, len(tokens) - 1)
        memory = llama_cpp.llama_get_memory(llama.ctx)
        if (
            reuse > 0
            and memory is not None
            and llama_cpp.llama_memory_seq_rm(memory, -1, reuse, -1)
        ):
            llama.n_tokens = reuse
            return tokens[reuse:]
        # A context that cannot drop a part of its memory (a recurrent model) reads
        # everything again.
        llama.reset()  # type: ignore[no-untyped-call]
        return tokens

    def cached_prefix(self, tokens: Sequence[int]) -> int:
        """How many of ``tokens`` the context holds from the start."""
        llama = self.llama
        return common_prefix(llama.input_ids[: llama.n_tokens].tolist(), tokens)

    def save_state(self) -> tuple[bytes, list[int]] | None:
        """The context's state (its KV cache) and the tokens it holds; ``None`` when
        it holds none. Not llama-cpp-python's ``save_state``: that one copies the
        logits of a whole batch too (hundreds of MiB with a large vocabulary)."""
        import llama_cpp

        llama = self.llama
        count = llama.n_tokens
        if count <= 0:
            return None
        ctx = llama.ctx
        size = int(llama_cpp.llama_state_get_size(ctx))
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_get_data(ctx, buffer, size))
        if written <= 0 or written > size:
            return None
        return bytes(buffer)[:written], llama.input_ids[:count].tolist()

    def load_state(self, data: bytes, tokens: Sequence[int]) -> bool:
        """Put a state ``save_state`` gave back into the context; ``False`` (and an
        empty context) when llama.cpp refuses it or it holds more than fits."""
        import llama_cpp

        llama = self.llama
        if len(tokens) > self.n_ctx:
            return False
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if int(llama_cpp.llama_state_set_data(llama.ctx, buffer, len(data))) != len(data):
            self._forget()
            return False
        llama.input_ids[: len(tokens)] = tokens
        llama.n_tokens = len(tokens)
        # The logits are not the live decode's: the next prompt replays its last token.
        llama._requires_eval = True
        return True

    def _forget(self) -> None:
        """An empty context: nothing in it can be taken for a prefix of a prompt."""
        llama = self.llama
        llama.n_tokens = 0
        with contextlib.suppress(Exception):
            llama._ctx.kv_cache_clear()  # type: ignore[no-untyped-call]

    def embed(self, texts: Sequence[str]) -> tuple[list[list[float]], int]:
        """One normalised vector per text, and the tokens read."""
        vectors, count = self.llama.embed(list(texts), normalize=True, return_count=True)
        return [list(map(float, vector)) for vector in vectors], int(count)

    def close(self) -> None:
        """Free the model and its context (their memory goes back to the system)."""
        self.llama.close()


def common_prefix(done: Sequence[int], tokens: Sequence[int]) -> int:
    """How many of ``tokens`` the context already holds (llama-cpp-python reuses them)."""
    count = 0
    for a, b in zip(done, tokens, strict=False):
        if a != b:
            break
        count += 1
    return count
