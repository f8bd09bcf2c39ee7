"""Helpers for running the installed ``ollm`` console script in tests."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

OLLM = str(Path(sys.executable).with_name("ollm"))
# `ollm chat` logs conversations: in tests, to a database of the test run, never the user's.
TEST_LOGS = str(Path(tempfile.mkdtemp(prefix="ollm-test-logs-")) / "logs.db")


def ollm_env(**extra: str) -> dict[str, str]:
    """A clean environment for the CLI: no colour, no user defaults."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OLLM_", "OLLAMA_", "OPENAI_", "GEMINI_", "GOOGLE_", "ANTHROPIC_"))
    }
    env.update({"NO_COLOR": "1", "PYTHONUNBUFFERED": "1", "OLLM_LOGS_PATH": TEST_LOGS})
    env.update(extra)
    return env


def installed_plugin(folder: Path, name: str, module: str, support: Path) -> str:
    """A PYTHONPATH on which the module ``module`` (in ``support``) is the installed plugin
    ``name``, of the distribution ``ollm-NAME`` 1.0 (its metadata written in ``folder``)."""
    info = folder / f"ollm_{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ollm-{name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[ollm.plugins]\n{name} = {module}\n")
    return f"{folder}:{support}"
