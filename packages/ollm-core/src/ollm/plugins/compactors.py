"""The plugin that offers ollm's own compactors: ``auto``, ``clear-results``, ``trim``
and ``summarize`` (``ollm plugins`` lists them beside the plugins' ones).

They work without it too (an application's own ``Registries()``): a chat runs them on
the conversation's view (see ``ollm.runtime.compaction``).

Internal: not part of ollm's public API; its layout may change in any release.
"""

from __future__ import annotations

from collections.abc import Callable

from ollm.hookspecs import hookimpl
from ollm.types.compactor import Compactor, CompactorSpec

__all__ = ["ollm_compactors"]


def _builtin(strategy: str) -> Callable[[], Compactor]:
    def build() -> Compactor:
        from ollm.runtime.compaction import ViewCompactor

        return ViewCompactor(strategy)

    return build


@hookimpl
def ollm_compactors() -> list[CompactorSpec]:
    """``auto``, ``clear-results``, ``trim`` and ``summarize``."""
    return [
        CompactorSpec(
            "auto",
            _builtin("auto"),
            "clear-results, then trim (the default of ollm chat --compact)",
        ),
        CompactorSpec(
            "clear-results",
            _builtin("clear-results"),
            "Replace old tool results with [result of NAME elided: N tokens]",
        ),
        CompactorSpec(
            "trim",
            _builtin("trim"),
            "Leave out the oldest turns (a call with its results); the first and the latest stay",
        ),
        CompactorSpec(
            "summarize",
            _builtin("summarize"),
            "Trim, and send a summary of what was left out (summarize:MODEL has MODEL write it)",
        ),
    ]
