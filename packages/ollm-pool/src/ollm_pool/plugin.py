"""Registration module of the ollm_pool plugin (the ``pool`` entry point).

Discovery imports this module at start-up, so it imports nothing heavy and reads no
file: ``-p pool:NAME`` reads the pools file, and builds the pool's members through the
provider registry, only when the pool is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import ollm
from ollm.errors import ProviderNotFoundError
from ollm.types import ProviderBuilder, ProviderSpec

if TYPE_CHECKING:
    from ollm_pool._provider import PoolProvider

__all__ = ["build_named", "ollm_providers"]


def build_named(profile: str | None, registry: ProviderBuilder) -> PoolProvider:
    """The pool ``-p pool:NAME`` names (``-p pool``: the only one, or ``default``)."""
    from ollm_pool._config import build_pool

    return build_pool(profile, registry)


def _needs_registry() -> PoolProvider:
    raise ProviderNotFoundError(
        "A pool is built from the provider registry: use -p pool:NAME (a pool of pools.toml), "
        "or ollm_pool.PoolProvider([...]) in Python."
    )


@ollm.hookimpl
def ollm_providers() -> list[ProviderSpec]:
    """The ``pool`` provider: ``-p pool:NAME`` for each pool of the pools file."""
    return [
        ProviderSpec(
            "pool",
            _needs_registry,
            "Several servers as one provider: -p pool:NAME (pools.toml)",
            composite_factory=build_named,
        )
    ]
