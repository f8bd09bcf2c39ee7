"""Names a package exports, imported on first use (PEP 562): importing it stays cheap.

Used by ollm itself and by the plugin packages, whose registration modules must load
without pulling in an HTTP client or a parser.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str], namespace: MutableMapping[str, object]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``.

    ``where`` maps each lazily exported name to the module that defines it (absolute,
    or relative to ``package`` when it starts with a dot). A name, once loaded, is put
    into ``namespace`` so that the next access is an ordinary attribute.
    """

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        exported = namespace.get("__all__")
        return sorted(exported if isinstance(exported, list) else where)

    return __getattr__, __dir__
