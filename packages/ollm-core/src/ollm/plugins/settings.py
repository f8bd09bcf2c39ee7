"""The switches that decide which plugins load, read from the environment in one place."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "ENV_ALLOW",
    "ENV_BLOCK",
    "ENV_DISABLE_AUTOLOAD",
    "ENV_STRICT",
    "PluginSettings",
    "environment_name",
]

ENV_ALLOW = "OLLM_PLUGINS"
ENV_BLOCK = "OLLM_BLOCK_PLUGINS"
ENV_DISABLE_AUTOLOAD = "OLLM_DISABLE_PLUGIN_AUTOLOAD"
ENV_STRICT = "OLLM_STRICT_PLUGINS"

_TRUE = frozenset(("1", "true", "yes", "on"))
_CHOICE_PREFIXES = (
    "OLLM_PROVIDER_",
    "OLLM_TOOL_",
    "OLLM_TOOLSET_",
    "OLLM_STRATEGY_",
    "OLLM_MIDDLEWARE_",
)


@dataclass(frozen=True)
class PluginSettings:
    """Which plugins load.

    - ``allow``: when set, only these entry-point names load (``OLLM_PLUGINS=ollama,react``);
    - ``block``: these never load, and are never imported (``OLLM_BLOCK_PLUGINS=broken``);
    - ``autoload``: ``False`` loads no entry point at all, only plugins passed by hand
      (``OLLM_DISABLE_PLUGIN_AUTOLOAD=1``);
    - ``strict``: the first failure raises ``PluginError`` instead of being recorded
      and skipped, for plugin authors and CI (``OLLM_STRICT_PLUGINS=1``);
    - ``choices``: which plugin provides a name several offer
      (``OLLM_PROVIDER_OLLAMA=myplugin``, ``OLLM_TOOL_CALCULATE=mytools``).
    """

    allow: frozenset[str] | None = None
    block: frozenset[str] = frozenset()
    autoload: bool = True
    strict: bool = False
    choices: Mapping[str, str] = field(default_factory=dict)
    """``OLLM_PROVIDER_<NAME>`` / ``OLLM_TOOL_<NAME>`` (and toolset, strategy, middleware): which
    plugin provides a name that several plugins offer."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> PluginSettings:
        """Read the switches from ``environ`` (pass ``os.environ``)."""
        allow_raw = environ.get(ENV_ALLOW, "").strip()
        return cls(
            allow=_names(allow_raw) if allow_raw else None,
            block=_names(environ.get(ENV_BLOCK, "")),
            autoload=environ.get(ENV_DISABLE_AUTOLOAD, "").strip().lower() not in _TRUE,
            strict=environ.get(ENV_STRICT, "").strip().lower() in _TRUE,
            choices={
                key: value.strip()
                for key, value in environ.items()
                if key.startswith(_CHOICE_PREFIXES) and value.strip()
            },
        )

    def admits(self, name: str) -> bool:
        """Whether the allow and block lists let ``name`` load."""
        if name in self.block:
            return False
        return self.allow is None or name in self.allow


def environment_name(name: str) -> str:
    """``name`` as part of an environment variable's name: in upper case, with each
    character other than ``A``-``Z`` and ``0``-``9`` (``-``, ``.``, ``:``, a space...) as
    ``_``. ``my-llm`` gives ``MY_LLM``, as in ``OLLM_PROVIDER_MY_LLM``."""
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def _names(raw: str) -> frozenset[str]:
    return frozenset(n.strip() for n in raw.split(",") if n.strip())
