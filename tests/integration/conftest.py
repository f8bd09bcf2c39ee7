"""Fixtures of the integration tests: the typed-output tests' fake server of each wire."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typed_fakes import PROVIDERS, Fake


@pytest.fixture(params=PROVIDERS)
def fake(request: pytest.FixtureRequest) -> Iterator[Fake]:
    """A fake server of each wire (Ollama, OpenAI-compatible, Gemini, Anthropic), with a
    provider on it."""
    with Fake(str(request.param)) as made:
        yield made
