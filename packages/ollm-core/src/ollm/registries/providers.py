"""The provider registry: providers by name, built lazily, and the default one."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ollm.errors import OllmError, PluginError, ProviderNotFoundError
from ollm.types.provider import Closeable, ProviderAdapter
from ollm.types.specs import ProviderSpec

__all__ = ["ProviderRegistry"]

log = logging.getLogger(__name__)


class ProviderRegistry:
    """Providers by name.

    A provider is registered either as an object or as a ``ProviderSpec`` whose factory
    runs on first ``get``. The registry owns what its factories built and closes it in
    ``aclose``; an object registered as it is belongs to the caller. The default is the
    one ``set_default`` named, else the one a plugin marked as default, else the only
    one registered.
    """

    def __init__(self) -> None:
        self._specs: dict[str, ProviderSpec] = {}
        self._built: dict[str, ProviderAdapter] = {}
        self._objects: set[str] = set()
        self._default: str | None = None

    def register(self, provider: ProviderAdapter | ProviderSpec, *, replace: bool = False) -> None:
        """Add a provider (or its spec) under its name; names are unique unless ``replace``."""
        if isinstance(provider, ProviderSpec):
            spec = provider
        else:
            name = getattr(provider, "name", None)
            if not isinstance(name, str) or not name:
                raise TypeError("a provider needs a non-empty string attribute 'name'")
            if not callable(getattr(provider, "chat_stream", None)):
                raise TypeError(f"provider {name!r} has no chat_stream method")
            spec = ProviderSpec(name=name, factory=lambda: provider)
        if spec.name in self._specs and not replace:
            raise ValueError(f"a provider named {spec.name!r} is already registered")
        self._specs[spec.name] = spec
        self._built.pop(spec.name, None)
        self._objects.discard(spec.name)
        if not isinstance(provider, ProviderSpec):
            self._built[spec.name] = provider
            self._objects.add(spec.name)

    def unregister(self, name: str) -> None:
        """Remove a provider (it is not closed)."""
        self._specs.pop(name, None)
        self._built.pop(name, None)
        self._objects.discard(name)
        if self._default == name:
            self._default = None

    def get(self, name: str | None = None) -> ProviderAdapter:
        """The provider called ``name``, or the default one when ``name`` is ``None``."""
        if name is None:
            return self.get_default()
        provider = self._built.get(name)
        if provider is not None:
            return provider
        factory = self._factory(name)
        try:
            provider = factory()
        except OllmError:
            raise
        except Exception as exc:
            raise PluginError(
                f"Provider {name!r} failed to start: {exc}. "
                "Run `ollm plugins` to see where it comes from."
            ) from exc
        self._built[name] = provider
        return provider

    def _factory(self, name: str) -> Callable[[], ProviderAdapter]:
        """What builds ``name``: its spec's factory, or for ``base:profile`` its profile's."""
        spec = self._specs.get(name)
        if spec is not None:
            return spec.factory
        base, colon, profile = name.partition(":")
        spec = self._specs.get(base) if colon else None
        if spec is None:
            raise ProviderNotFoundError(self._unknown(name))
        profile_factory = spec.profile_factory
        if profile_factory is None:
            raise ProviderNotFoundError(
                f"Provider {base!r} has no named profiles, so {name!r} means nothing. "
                f"Use -p {base}."
            )
        if not profile:
            raise ProviderNotFoundError(
                f"{name!r} names no profile: write it as {base}:NAME, or use -p {base}."
            )
        return lambda: profile_factory(profile)

    def set_default(self, name: str) -> None:
        """Make ``name`` the default provider."""
        if name not in self._specs:
            self._factory(name)  # raises unless it is a profile of a registered provider
        self._default = name

    @property
    def default_name(self) -> str | None:
        """The name ``get_default`` resolves to, or ``None`` if there is none."""
        if self._default is not None:
            return self._default
        for name, spec in self._specs.items():
            if spec.default:
                return name
        if len(self._specs) == 1:
            return next(iter(self._specs))
        return None

    def get_default(self) -> ProviderAdapter:
        """The default provider."""
        name = self.default_name
        if name is None:
            if not self._specs:
                raise ProviderNotFoundError(
                    "No provider is installed. Install one, for example: pip install ollm-ollama"
                )
            raise ProviderNotFoundError(
                "No default provider: several are registered "
                f"({', '.join(self._specs)}). Choose one (ollm chat -p NAME, "
                "or provider=NAME), or call set_default()."
            )
        return self.get(name)

    def list(self) -> list[str]:
        """The registered names, each once, in registration order."""
        return list(self._specs)

    def spec(self, name: str) -> ProviderSpec:
        """How ``name`` was registered (its description, whether it asked to be default)."""
        spec = self._specs.get(name)
        if spec is None:
            raise ProviderNotFoundError(self._unknown(name))
        return spec

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    async def aclose(self) -> None:
        """Close the providers the registry's factories built; they are rebuilt if needed."""
        owned = [name for name in self._built if name not in self._objects]
        for name in owned:
            provider = self._built.pop(name)
            if isinstance(provider, Closeable):
                try:
                    await provider.aclose()
                except Exception:
                    log.warning("closing provider %r failed", name, exc_info=True)

    def _unknown(self, name: str) -> str:
        known = list(self._specs)
        if not known:
            return (
                f"Provider {name!r} is not installed, and no provider is. "
                "Install one, for example: pip install ollm-ollama"
            )
        import difflib  # only for this message: it is slow to import

        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return (
            f"Provider {name!r} is not installed.{hint} Available: {', '.join(known)}. "
            "Run `ollm plugins` to see what is installed."
        )
