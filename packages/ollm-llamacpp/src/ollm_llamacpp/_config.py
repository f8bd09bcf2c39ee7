"""The provider's settings: arguments, else the environment, else defaults; read once."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ollm.errors import InvalidRequestError
from ollm.logs import data_dir, logging_enabled, logs_path
from ollm_llamacpp._machine import physical_cores

__all__ = [
    "DEFAULT_MAX_CONTEXT",
    "DEFAULT_MAX_TOKENS",
    "ENV_GPU_LAYERS",
    "ENV_MAX_CONTEXT",
    "ENV_MAX_TOKENS",
    "ENV_MEMORY_CHECK",
    "ENV_MODEL",
    "ENV_MODELS",
    "ENV_STATE_CACHE",
    "ENV_STATE_CACHE_MB",
    "ENV_THREADS",
    "LlamaCppConfig",
    "models_folder",
]

ENV_MODELS = "OLLM_LLAMACPP_MODELS"
ENV_MODEL = "OLLM_LLAMACPP_MODEL"
ENV_THREADS = "OLLM_LLAMACPP_THREADS"
ENV_MAX_CONTEXT = "OLLM_LLAMACPP_MAX_CONTEXT"
ENV_GPU_LAYERS = "OLLM_LLAMACPP_GPU_LAYERS"
ENV_MAX_TOKENS = "OLLM_LLAMACPP_MAX_TOKENS"
ENV_STATE_CACHE = "OLLM_LLAMACPP_STATE_CACHE"
ENV_STATE_CACHE_MB = "OLLM_LLAMACPP_STATE_CACHE_MB"
ENV_MEMORY_CHECK = "OLLM_LLAMACPP_MEMORY_CHECK"

DEFAULT_MAX_CONTEXT = 8192
"""The largest context a model is loaded with unless asked: a model trained on 128K
tokens would otherwise reserve gigabytes for a chat of a few hundred."""
DEFAULT_MAX_TOKENS = 1024
"""The tokens a reply may take when the request sets no ``max_tokens``: a base model
asked for JSON, or given a list, goes on until the context is full (minutes, with
nothing to show under a schema)."""
DEFAULT_STATE_CACHE_MB = 1024
"""The size limit of the folder of saved conversation states (the oldest go first)."""
DEFAULT_BATCH = 512
_OFF = {"0", "off", "false", "no"}


def models_folder(environ: Mapping[str, str] | None = None) -> Path:
    """Where models are looked up by name: ``OLLM_LLAMACPP_MODELS``, else ``models`` in
    ollm's data folder (``~/.local/share/ollm/models`` on Linux)."""
    env = os.environ if environ is None else environ
    explicit = env.get(ENV_MODELS)
    if explicit:
        return Path(explicit).expanduser()
    return data_dir(env) / "models"


@dataclass(frozen=True)
class LlamaCppConfig:
    """How models are found, loaded and run; see ``LlamaCppProvider``."""

    models_dir: Path
    default_model: str | None
    threads: int
    max_context: int
    gpu_layers: int
    batch_size: int
    memory_check: bool
    max_tokens: int = DEFAULT_MAX_TOKENS
    state_dir: Path | None = None
    state_limit: int = DEFAULT_STATE_CACHE_MB * 1024 * 1024

    @classmethod
    def resolve(
        cls,
        *,
        models_dir: str | Path | None,
        model: str | None,
        threads: int | None,
        max_context: int | None,
        gpu_layers: int | None,
        batch_size: int | None,
        memory_check: bool | None,
        environ: Mapping[str, str],
        max_tokens: int | None = None,
        state_dir: str | Path | bool | None = None,
    ) -> LlamaCppConfig:
        """Arguments first, then the environment, then the defaults."""
        folder = Path(models_dir).expanduser() if models_dir else models_folder(environ)
        check = memory_check
        if check is None:
            check = environ.get(ENV_MEMORY_CHECK, "").strip().lower() not in _OFF
        return cls(
            models_dir=folder,
            default_model=model or environ.get(ENV_MODEL) or None,
            threads=_number(threads, environ, ENV_THREADS, "threads") or physical_cores(),
            max_context=(
                _number(max_context, environ, ENV_MAX_CONTEXT, "max_context") or DEFAULT_MAX_CONTEXT
            ),
            gpu_layers=_number(gpu_layers, environ, ENV_GPU_LAYERS, "gpu_layers", low=-1) or 0,
            batch_size=_number(batch_size, {}, "", "batch_size") or DEFAULT_BATCH,
            memory_check=check,
            max_tokens=(
                _number(max_tokens, environ, ENV_MAX_TOKENS, "max_tokens") or DEFAULT_MAX_TOKENS
            ),
            state_dir=_state_dir(state_dir, environ),
            state_limit=1024
            * 1024
            * (_number(None, environ, ENV_STATE_CACHE_MB, "") or DEFAULT_STATE_CACHE_MB),
        )


def _state_dir(value: str | Path | bool | None, environ: Mapping[str, str]) -> Path | None:
    """Where conversation states are saved: the argument (``False``: nowhere), else
    ``OLLM_LLAMACPP_STATE_CACHE`` (``off``: nowhere), else ``llamacpp-state`` beside the
    conversation log, and nowhere when the log is off (``OLLM_LOGS=off``, which
    ``ollm chat --no-log`` sets): a state holds the conversation, and a chat kept out of
    the log is kept off the disk."""
    if value is False:
        return None
    if isinstance(value, (str, Path)) and str(value):
        return Path(value).expanduser()
    text = environ.get(ENV_STATE_CACHE, "").strip()
    if text.lower() in _OFF:
        return None
    if text:
        return Path(text).expanduser()
    if not logging_enabled(environ):
        return None
    return logs_path(environ).parent / "llamacpp-state"


def _number(
    value: int | None, environ: Mapping[str, str], variable: str, name: str, *, low: int = 1
) -> int | None:
    """``value``, else the integer in ``variable``; ``None`` when neither says."""
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidRequestError(
                f"{name} must be an integer of at least {low}, not {value!r}."
            )
        return value
    text = environ.get(variable, "").strip() if variable else ""
    if not text:
        return None
    try:
        number = int(text)
    except ValueError:
        number = low - 1
    if number < low:
        raise InvalidRequestError(
            f"{variable}={text!r} is not an integer of at least {low}: set it to one, or "
            "unset it for the default."
        )
    return number
