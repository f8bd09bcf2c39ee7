"""The provider registry: providers by name, built lazily, and the default one."""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ollm.errors import InvalidRequestError, OllmError, PluginError, ProviderNotFoundError
from ollm.types.provider import Closeable, ProviderAdapter
from ollm.types.specs import ProviderSpec

__all__ = ["FIRST_PARTY_PROVIDERS", "ProviderRegistry"]

log = logging.getLogger(__name__)

FIRST_PARTY_PROVIDERS = {
    "ollama": "ollm-ollama",
    "openai": "ollm-openai",
    "gemini": "ollm-gemini",
    "anthropic": "ollm-anthropic",
    "pool": "ollm-pool",
    "echo": "ollm-testutils",
}
"""The providers of ollm's own distributions, by name: what to install for each."""


class ProviderRegistry:
    """Providers by name.

    A provider is registered either as an object or as a ``ProviderSpec`` whose factory
    runs on first ``get``. The registry owns what its factories built and closes it in
    ``aclose``; an object registered as it is belongs to the caller. The default is the
    one ``set_default`` named, else the one a plugin marked as default, else the only
    one registered.

    Names ignore case, as plugin discovery does when it settles clashes: ``Parrot`` and
    ``parrot`` are one name, so ``get("OLLAMA")`` finds ``ollama`` and registering
    ``Ollama`` beside it is a clash. A provider keeps the spelling it was registered
    with (``list()`` and ``ollm plugins`` show it).
    """

    def __init__(self) -> None:
        self._specs: dict[str, ProviderSpec] = {}
        self._built: dict[str, ProviderAdapter] = {}
        self._objects: set[str] = set()
        self._default: str | None = None
        self._spellings: dict[str, str] = {}  # casefolded name -> the registered name

    def _registered(self, name: str) -> str | None:
        """The registered spelling of ``name`` (any case), or ``None``."""
        return name if name in self._specs else self._spellings.get(name.casefold())

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
        known = self._registered(spec.name)
        if known is not None:
            if not replace:
                raise ValueError(
                    f"a provider named {known!r} is already registered (names ignore case)"
                )
            was_default = self._default == known
            self.unregister(known)
            if was_default:
                self._default = spec.name
        self._specs[spec.name] = spec
        self._spellings[spec.name.casefold()] = spec.name
        self._built.pop(spec.name, None)
        self._objects.discard(spec.name)
        if not isinstance(provider, ProviderSpec):
            self._built[spec.name] = provider
            self._objects.add(spec.name)

    def unregister(self, name: str) -> None:
        """Remove a provider (it is not closed)."""
        name = self._registered(name) or name
        self._specs.pop(name, None)
        self._spellings.pop(name.casefold(), None)
        self._built.pop(name, None)
        self._objects.discard(name)
        if self._default == name:
            self._default = None

    def get(self, name: str | None = None) -> ProviderAdapter:
        """The provider called ``name``, or the default one when ``name`` is ``None``."""
        if name is None:
            return self.get_default()
        name, factory = self._factory(name)
        provider = self._built.get(name)
        if provider is not None:
            return provider
        provider = _started(name, factory)
        self._built[name] = provider
        return provider

    def build(self, name: str, settings: Mapping[str, Any] | None = None) -> ProviderAdapter:
        """A new provider ``name`` (``NAME`` or ``NAME:PROFILE``), configured with ``settings``.

        ``settings`` is a table as a configuration file gives it (``{"host":
        "http://gpu-a:11434"}``), passed to the spec's ``settings_factory`` (with
        ``profile`` set for ``NAME:PROFILE``); without settings, the provider is built as
        ``get`` would build it. Unlike ``get``, each call builds another instance, which
        the caller owns (and closes): a pool builds its members so. A provider registered
        as an object is that object.
        """
        if not settings:
            return _started(name, self._factory(name)[1])
        base, colon, profile = name.partition(":")
        known = self._registered(name) or (self._registered(base) if colon else None)
        if known is None:
            raise ProviderNotFoundError(self._unknown(name))
        spec = self._specs[known]
        settings_factory = spec.settings_factory
        if settings_factory is None or known in self._objects:
            raise InvalidRequestError(
                f"Provider {known!r} takes no settings here ({', '.join(sorted(settings))}). "
                f"Leave them out, or configure it as its documentation says."
            )
        table = dict(settings)
        if colon and known != name:
            table["profile"] = profile
        return _started(name, lambda: settings_factory(table))

    def _factory(self, name: str) -> tuple[str, Callable[[], ProviderAdapter]]:
        """The registered spelling of ``name`` and what builds it: its spec's factory, or
        for ``base:profile`` its profile's (a composite's, when it has one)."""
        known = self._registered(name)
        if known is not None:
            composite = self._specs[known].composite_factory
            if composite is not None:
                return known, lambda: composite(None, self)
            return known, self._specs[known].factory
        base, colon, profile = name.partition(":")
        known = self._registered(base) if colon else None
        if known is None:
            raise ProviderNotFoundError(self._unknown(name))
        base, spec = known, self._specs[known]
        if profile and spec.composite_factory is not None:
            composite = spec.composite_factory
            return f"{base}:{profile}", lambda: composite(profile, self)
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
        return f"{base}:{profile}", lambda: profile_factory(profile)

    def set_default(self, name: str) -> None:
        """Make ``name`` the default provider (a profile, ``base:profile``, will do)."""
        self._default = self._factory(name)[0]  # raises unless it names a provider

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
                f"({', '.join(self._specs)}), and none was chosen. Choose one "
                "(provider=NAME, or set_default(NAME))."
            )
        return self.get(name)

    def list(self) -> builtins.list[str]:
        """The registered names, each once, in registration order."""
        return list(self._specs)

    def spec(self, name: str) -> ProviderSpec:
        """How ``name`` was registered (its description, whether it asked to be default)."""
        known = self._registered(name)
        if known is None:
            raise ProviderNotFoundError(self._unknown(name))
        return self._specs[known]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._registered(name) is not None

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
        distribution = FIRST_PARTY_PROVIDERS.get(name.partition(":")[0].casefold())
        if distribution is not None:
            # One of ollm's own: say which distribution brings it.
            installed = f" Installed: {', '.join(known)}." if known else ""
            return (
                f"Provider {name!r} is not installed: it comes with {distribution}. "
                f"Install it with: pip install {distribution}.{installed} If it is "
                "installed, `ollm plugins` shows whether its plugin was blocked or failed."
            )
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


def _started(name: str, factory: Callable[[], ProviderAdapter]) -> ProviderAdapter:
    """What ``factory`` builds; a failure of plugin code as a ``PluginError`` naming ``name``."""
    try:
        return factory()
    except OllmError:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        # Plugin code: not even sys.exit() in a factory may end the program.
        raise PluginError(
            f"Provider {name!r} failed to start: {describe_failure(exc)}. "
            "Run `ollm plugins` to see where it comes from."
        ) from exc


def describe_failure(exc: BaseException) -> str:
    """What plugin code failed with, in one line: an ollm error's message, else
    ``Type: message`` (``SystemExit: 3``)."""
    if isinstance(exc, OllmError):
        return exc.message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
