"""Helpers for running the installed ``ollm`` console script in tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

OLLM = str(Path(sys.executable).with_name("ollm"))


def ollm_env(**extra: str) -> dict[str, str]:
    """A clean environment for the CLI: no colour, no user defaults."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OLLM_", "OLLAMA_", "OPENAI_", "GEMINI_", "GOOGLE_"))
    }
    env.update({"NO_COLOR": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env
