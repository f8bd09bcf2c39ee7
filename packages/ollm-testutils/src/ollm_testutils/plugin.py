"""The ``testutils`` plugin: registers the ``echo`` provider (entry point group
``ollm.plugins``). Kept tiny: the provider's module is imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.hookspecs import hookimpl
from ollm.types import ProviderSpec

if TYPE_CHECKING:
    from ollm.types import ProviderAdapter

__all__ = ["ollm_providers"]


def _build_echo() -> ProviderAdapter:
    from ollm_testutils.echo import EchoProvider

    return EchoProvider()


@hookimpl
def ollm_providers() -> list[ProviderSpec]:
    """The echo provider: answers with the prompt, no server needed (model ``echo``)."""
    return [
        ProviderSpec(
            name="echo",
            factory=_build_echo,
            description="Answers with the prompt; a JSON prompt scripts tool calls (no server)",
        )
    ]
