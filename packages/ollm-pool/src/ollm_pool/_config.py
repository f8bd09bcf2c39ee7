"""Named pools in a TOML file, built through the provider registry (``-p pool:home``).

::

    # ~/.config/ollm/pools.toml (or the file OLLM_POOLS names)
    [home]
    model = "llama3.2"                   # the default model (optional)
    model_fallbacks = ["llama3.2:1b"]    # after every member failed for the model asked
    attempts = 3                         # the retry budget of one request

    [[home.members]]
    provider = "ollama"                  # any installed provider, as -p names it
    host = "http://gpu-a:11434"          # ...and its settings (OllamaProvider's arguments)
    parallel = 4

    [[home.members]]
    provider = "openai:vllm"             # a profile of openai.toml
    parallel = 64

A member's ``provider``, ``name``, ``parallel`` and ``context_window`` are the pool's;
its other keys are the provider's settings, passed to its plugin
(``ProviderRegistry.build``). The pool never imports a provider's package.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from ollm.errors import InvalidRequestError, OllmError, ProviderNotFoundError
from ollm.kit import config_path, named_tables
from ollm.types import ProviderAdapter, ProviderBuilder

if TYPE_CHECKING:
    from ollm_pool._provider import PoolProvider

__all__ = [
    "ENV_POOLS",
    "MEMBER_KEYS",
    "PoolSettings",
    "build_pool",
    "chosen_pool",
    "load_pools",
    "pools_path",
]

ENV_POOLS = "OLLM_POOLS"
MEMBER_KEYS = ("provider", "name", "parallel", "context_window")
"""The keys of a member's table that are the pool's (the others are the provider's)."""


class PoolSettings(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One named pool of the pools file: its members' tables and its own settings."""

    members: list[dict[str, Any]] = msgspec.field(default_factory=list)
    model: str | None = None
    model_fallbacks: list[str] = msgspec.field(default_factory=list)
    attempts: int = 3
    wait_limit: float = 30.0
    backoff: float = 1.0
    max_backoff: float = 60.0
    description: str | None = None


def pools_path(environ: Mapping[str, str] | None = None) -> Path:
    """The pools file: ``OLLM_POOLS``, else ``pools.toml`` in ollm's configuration folder."""
    return config_path("pools.toml", ENV_POOLS, environ)


def load_pools(environ: Mapping[str, str] | None = None) -> dict[str, PoolSettings]:
    """Every pool of the pools file (none when there is no file)."""
    return named_tables(
        pools_path(environ),
        PoolSettings,
        what="The pools file",
        item="pool",
        variable=ENV_POOLS,
        shape="Each pool is a table, for example [home], with its members as [[home.members]] "
        'and provider = "ollama".',
        table="Write each pool as [{name}], and each of its members as [[{name}.members]] "
        'with provider = "...".',
    )


def chosen_pool(
    profile: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str, PoolSettings]:
    """The pool ``-p pool:NAME`` names; for ``-p pool``, the file's only pool, or ``default``."""
    pools = load_pools(environ)
    path = pools_path(environ)
    none = f"{path} has none" if path.exists() else f"{path} does not exist"
    if profile is None:
        if len(pools) == 1:
            return next(iter(pools.items()))
        if "default" in pools:
            return "default", pools["default"]
        if not pools:
            raise ProviderNotFoundError(
                f"No pool is configured: {none}. Describe one there, for example "
                '[home] with [[home.members]] provider = "ollama" and host = "http://HOST:11434", '
                f"then use -p pool:home (or set {ENV_POOLS} to the file that has it)."
            )
        raise ProviderNotFoundError(
            f"{path} has several pools: name one with -p pool:NAME ({', '.join(sorted(pools))})."
        )
    found = pools.get(profile)
    if found is not None:
        return profile, found
    if not pools:
        raise ProviderNotFoundError(
            f"There is no pool {profile!r}: {none}. Describe it there as [{profile}] "
            f'with its members as [[{profile}.members]] provider = "ollama" and host = '
            f'"http://HOST:11434", or set {ENV_POOLS} to the file that has it.'
        )
    raise ProviderNotFoundError(
        f"There is no pool {profile!r} in {path}. Known pools: {', '.join(sorted(pools))}."
    )


def build_pool(
    profile: str | None, registry: ProviderBuilder, environ: Mapping[str, str] | None = None
) -> PoolProvider:
    """The pool ``-p pool:NAME`` (``profile``) names, its members built by ``registry``."""
    from ollm_pool._member import Member
    from ollm_pool._provider import PoolProvider

    name, settings = chosen_pool(profile, environ)
    path = pools_path(environ)
    if not settings.members:
        raise InvalidRequestError(
            f"The pool {name!r} in {path} has no members. Add each as [[{name}.members]] "
            'with provider = "ollama" and host = "http://HOST:11434" (or another provider).'
        )
    try:
        members = [
            Member(provider, **own)
            for provider, own in (
                _member(registry, f"Member {number} of the pool {name!r} in {path}", table)
                for number, table in enumerate(settings.members, 1)
            )
        ]
        return PoolProvider(
            members,
            name=f"pool:{name}",
            model=settings.model,
            model_fallbacks=settings.model_fallbacks,
            attempts=settings.attempts,
            wait_limit=settings.wait_limit,
            backoff=settings.backoff,
            max_backoff=settings.max_backoff,
        )
    except (TypeError, ValueError) as exc:
        raise InvalidRequestError(f"The pool {name!r} in {path} is not valid: {exc}.") from None


def _member(
    registry: ProviderBuilder, where: str, table: Mapping[str, Any]
) -> tuple[ProviderAdapter, dict[str, Any]]:
    """A member's provider, built by the registry, and the pool's own keys of its table."""
    provider = table.get("provider")
    if not isinstance(provider, str) or not provider.strip():
        raise InvalidRequestError(
            f'{where} names no provider. Add one, for example provider = "ollama".'
        )
    if provider.partition(":")[0].strip().casefold() == "pool":
        raise InvalidRequestError(f"{where} is a pool; a pool's members are servers.")
    own = {key: table[key] for key in MEMBER_KEYS if key in table and key != "provider"}
    settings = {key: value for key, value in table.items() if key not in MEMBER_KEYS}
    try:
        return registry.build(provider.strip(), settings), own
    except OllmError as exc:
        raise type(exc)(f"{where}: {exc.message}", code=exc.code) from None
