"""The ``ollm.plugins`` entry points, remembered between runs so start-up stays fast.

Reading entry points means importing ``importlib.metadata`` (with ``email``, ``zipfile``
and more) and reading every distribution's metadata on ``sys.path``: most of what
``ollm`` spends before it does anything. The list found is kept in a small JSON file in
the user's cache folder, keyed by ``sys.path`` and the modification time of each of its
folders: installing or removing a distribution changes its site-packages folder, so the
key changes and the entry points are read afresh. ``OLLM_PLUGIN_CACHE=off`` turns the
cache off; a cache that cannot be read or written is ignored.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["CachedEntryPoint", "Distribution", "cache_path", "entry_points"]

ENV_CACHE = "OLLM_PLUGIN_CACHE"
_VERSION = 1
_KEYS = 8


class Distribution:
    """What a plugin record shows of an entry point's distribution."""

    __slots__ = ("name", "version")

    def __init__(self, name: str | None, version: str | None) -> None:
        self.name = name
        self.version = version


class CachedEntryPoint:
    """An entry point as ``importlib.metadata.EntryPoint`` gives it: name, value, dist, load."""

    __slots__ = ("dist", "group", "name", "value")

    def __init__(self, name: str, value: str, group: str, dist: Distribution) -> None:
        self.name = name
        self.value = value
        self.group = group
        self.dist = dist

    def load(self) -> Any:
        """Import the module (and the attribute after ``:``, if any) the entry point names."""
        module_name, _, attributes = self.value.partition(":")
        target: Any = importlib.import_module(module_name.strip())
        for attribute in filter(None, attributes.strip().split(".")):
            target = getattr(target, attribute)
        return target


def cache_path(environ: Mapping[str, str] | None = None) -> Path:
    """The cache file of this interpreter."""
    env = os.environ if environ is None else environ
    if sys.platform == "win32":
        base = Path(env.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    # One file per interpreter (each virtual environment has its own entry points).
    tag = f"{zlib.crc32(sys.executable.encode()):08x}"
    return base / "ollm" / f"entry-points-{tag}.json"


def _key(group: str) -> str:
    parts = [str(_VERSION), group, sys.executable]
    for entry in sys.path:
        try:
            parts.append(f"{entry}:{os.stat(entry or '.').st_mtime_ns}")
        except OSError:
            parts.append(f"{entry}:-")
    # The whole text is the key (a hash would cost hashlib's import at every start).
    return "\n".join(parts)


def _read(group: str) -> list[tuple[str, str, str | None, str | None]]:
    from importlib import metadata

    found: dict[tuple[str, str], tuple[str, str, str | None, str | None]] = {}
    for ep in metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        # Several copies of one distribution on sys.path show the same entry point twice.
        found.setdefault(
            (ep.name, ep.value),
            (ep.name, ep.value, getattr(dist, "name", None), getattr(dist, "version", None)),
        )
    return list(found.values())


def entry_points(group: str, environ: Mapping[str, str] | None = None) -> list[CachedEntryPoint]:
    """The entry points of ``group``, from the cache when ``sys.path`` did not change."""
    env = os.environ if environ is None else environ
    use_cache = env.get(ENV_CACHE, "").strip().lower() not in ("off", "0", "false", "no")
    key = _key(group)
    path = cache_path(env)
    cached: dict[str, Any] = {}
    rows: Any = None
    if use_cache:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and isinstance(data.get("keys"), dict):
                cached = data["keys"]
                rows = cached.get(key)
        except (OSError, ValueError):
            cached = {}
    if not isinstance(rows, list) or not all(
        isinstance(row, list) and len(row) == 4 for row in rows
    ):
        rows = [list(row) for row in _read(group)]
        if use_cache:
            # A few keys side by side: one interpreter may run with several sys.path
            # (a script's folder, `python -m`), and they must not evict one another.
            kept = dict(list(cached.items())[-(_KEYS - 1) :])
            kept[key] = rows
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                partial = path.with_suffix(f".{os.getpid()}.tmp")
                partial.write_text(json.dumps({"keys": kept}))
                os.replace(partial, path)
            except OSError:
                pass
    return [
        CachedEntryPoint(str(name), str(value), group, Distribution(dist, version))
        for name, value, dist, version in rows
    ]
