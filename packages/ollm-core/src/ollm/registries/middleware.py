"""Middleware that plugins offer: built only when a chat names it."""

from __future__ import annotations

import builtins

from ollm.errors import PluginError
from ollm.types.middleware import MIDDLEWARE_METHODS, is_middleware
from ollm.types.specs import MiddlewareSpec

__all__ = ["MiddlewareRegistry"]


class MiddlewareRegistry:
    """Middleware by name; ``create(name)`` builds one object from its factory."""

    def __init__(self) -> None:
        self._specs: dict[str, MiddlewareSpec] = {}

    def register(self, spec: MiddlewareSpec, *, replace: bool = False) -> None:
        """Add a middleware."""
        if not isinstance(spec, MiddlewareSpec):
            raise TypeError("register takes an ollm.MiddlewareSpec")
        if spec.name in self._specs and not replace:
            raise ValueError(f"a middleware named {spec.name!r} is already registered")
        self._specs[spec.name] = spec

    def create(self, name: str) -> object:
        """A new middleware object of the kind ``name``."""
        spec = self._specs.get(name)
        if spec is None:
            known = ", ".join(self._specs) or "none"
            raise PluginError(
                f"No middleware is named {name!r}. Installed: {known} (`ollm plugins` lists "
                "them with the plugins they come from)."
            )
        try:
            built = spec.factory()
        except Exception as exc:
            raise PluginError(
                f"Middleware {name!r} failed to start: {type(exc).__name__}: {exc}. "
                "Run `ollm plugins` to see where it comes from."
            ) from exc
        if not is_middleware(built):
            raise PluginError(
                f"Middleware {name!r} built {type(built).__name__}, which has none of the "
                f"middleware methods ({', '.join(MIDDLEWARE_METHODS)}). Report this to "
                "its author (`ollm plugins` says where it comes from)."
            )
        return built

    def list(self) -> builtins.list[str]:
        """The registered names."""
        return list(self._specs)

    def specs(self) -> builtins.list[MiddlewareSpec]:
        """Every registered middleware, in registration order."""
        return list(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs
