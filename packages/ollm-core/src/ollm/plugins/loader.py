"""Plugin discovery written for isolation: one broken plugin never takes the rest down.

Each plugin goes through three phases, and a failure in any of them is recorded (name,
distribution, version, phase, error) and skips that plugin alone:

1. ``import``: the entry point's module is imported (blocked plugins never are);
2. ``register``: pluggy checks its hook implementations against ``ollm.hookspecs``;
3. each hook (``ollm_providers``...): called on its own, and what it returns is checked.

A plugin's contributions enter the registries only when all its hooks succeeded, so
nothing is half-registered. Discovery does no network I/O: providers are factories.

Name clashes are decided by a fixed rule, never by alphabetical luck:

- names compare without case (``Ollama`` and ``ollama`` clash);
- ollm's own distributions (``FIRST_PARTY``) load first, so their names cannot be taken
  by a third-party plugin, whatever it is called; other plugins load by entry-point name;
- the first to register a name keeps it, unless the user chooses another plugin for it:
  ``OLLM_PROVIDER_<NAME>=<plugin>`` or ``OLLM_TOOL_<NAME>=<plugin>`` (the name in upper
  case, and each other character, such as ``-``, ``.`` or ``:``, as ``_``:
  ``OLLM_PROVIDER_MY_LLM`` for ``my-llm``);
- only the clashing item is skipped: the rest of that plugin loads, and its record in
  ``ollm plugins`` names the item, the plugin and distribution that kept it, and the
  variable that would choose this one instead. Under ``OLLM_STRICT_PLUGINS=1`` a clash
  is a ``PluginError``.

Internal: not part of ollm's public API (behind ``ollm.discover``); its layout may
change in any release.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pluggy

from ollm import hookspecs
from ollm.errors import PluginError
from ollm.plugins import _entrypoints
from ollm.plugins.settings import PluginSettings, environment_name
from ollm.registries import Registries
from ollm.registries.commands import BUILT_IN_COMMANDS
from ollm.registries.outputs import BUILT_IN as OUTPUT_BUILT_IN
from ollm.registries.providers import describe_failure
from ollm.tools.tool import Tool
from ollm.types.compactor import CompactorSpec
from ollm.types.output import OutputStrategySpec
from ollm.types.specs import (
    CommandSpec,
    MiddlewareSpec,
    PluginRecord,
    ProviderSpec,
    StrategySpec,
    TokenCounterSpec,
    ToolsetSpec,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "FIRST_PARTY",
    "build_plugin_manager",
    "choice_variable",
    "discover",
]

ENTRY_POINT_GROUP = "ollm.plugins"
FIRST_PARTY = frozenset(
    {
        "ollm-core",
        "ollm-ollama",
        "ollm-react",
        "ollm-testutils",
        "ollm-mcp",
        "ollm-openai",
        "ollm-gemini",
        "ollm-pool",
        "ollm-serve",
    }
)
"""ollm's own distributions: their plugins load first, so their names are theirs."""
HOOKS = (
    "ollm_providers",
    "ollm_tools",
    "ollm_token_counters",
    "ollm_tool_strategies",
    "ollm_toolsets",
    "ollm_middleware",
    "ollm_output_strategies",
    "ollm_compactors",
    "ollm_commands",
)

log = logging.getLogger(__name__)


class EntryPointLike(Protocol):
    """What discovery reads of an entry point (``importlib.metadata.EntryPoint`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> Any: ...


def build_plugin_manager() -> pluggy.PluginManager:
    """A fresh plugin manager with ollm's hook specs (one per test, if you like)."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager


@dataclass
class _Candidate:
    name: str
    entry_point: EntryPointLike | None = None
    plugin: object | None = None
    record: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Contribution:
    providers: list[ProviderSpec] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    token_counters: list[TokenCounterSpec] = field(default_factory=list)
    strategies: list[StrategySpec] = field(default_factory=list)
    toolsets: list[ToolsetSpec] = field(default_factory=list)
    middleware: list[MiddlewareSpec] = field(default_factory=list)
    outputs: list[OutputStrategySpec] = field(default_factory=list)
    compactors: list[CompactorSpec] = field(default_factory=list)
    commands: list[CommandSpec] = field(default_factory=list)


def discover(
    *,
    settings: PluginSettings | None = None,
    plugins: Sequence[object] = (),
    registries: Registries | None = None,
    manager: pluggy.PluginManager | None = None,
    entry_points: Iterable[EntryPointLike] | None = None,
) -> Registries:
    """Load plugins into registries and return them.

    ``settings`` default to the environment switches (``PluginSettings.from_env``).
    ``plugins`` are extra plugin objects (modules, classes, instances) that load
    whatever the switches say, as an application's own plugins would. ``entry_points``
    replaces the installed ``ollm.plugins`` entry points (for tests).
    """
    if settings is None:
        settings = PluginSettings.from_env(os.environ)
    registries = registries if registries is not None else Registries()
    manager = manager if manager is not None else build_plugin_manager()

    candidates: list[_Candidate] = []
    for index, plugin in enumerate(plugins):
        name = getattr(plugin, "__name__", None) or f"{type(plugin).__name__}-{index}"
        candidates.append(_Candidate(name=str(name), plugin=plugin, record={"module": str(name)}))

    found = _entry_points() if entry_points is None else list(entry_points)
    seen: set[str] = {c.name for c in candidates}
    for ep in sorted(found, key=_load_order):
        dist = getattr(ep, "dist", None)
        record: dict[str, Any] = {
            "module": ep.value,
            "distribution": getattr(dist, "name", None),
            "version": getattr(dist, "version", None),
        }
        candidate = _Candidate(name=ep.name, entry_point=ep, record=record)
        if ep.name in seen:
            _fail(registries, settings, candidate, "register", "another plugin has this name")
            continue
        seen.add(ep.name)
        if not settings.admits(ep.name):
            registries.plugins.append(PluginRecord(name=ep.name, status="blocked", **record))
            continue
        if not settings.autoload:
            registries.plugins.append(PluginRecord(name=ep.name, status="disabled", **record))
            continue
        candidates.append(candidate)

    owners: dict[tuple[str, str], tuple[str, str]] = {}
    for candidate in candidates:
        _load(candidate, manager, registries, settings, owners)
    return registries


def _load_order(ep: EntryPointLike) -> tuple[int, str]:
    dist = getattr(getattr(ep, "dist", None), "name", None) or ""
    return (0 if _canonical(dist) in FIRST_PARTY else 1, ep.name)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def choice_variable(kind: str, name: str) -> str:
    """The variable that chooses which plugin provides ``name``: ``OLLM_PROVIDER_OLLAMA``,
    ``OLLM_PROVIDER_MY_LLM`` for ``my-llm`` (see ``environment_name``)."""
    return f"OLLM_{environment_name(kind)}_{environment_name(name)}"


def _entry_points() -> list[_entrypoints.CachedEntryPoint]:
    # Remembered between runs (see ollm.plugins._entrypoints): importlib.metadata is slow.
    return _entrypoints.entry_points(ENTRY_POINT_GROUP)


def _load(
    candidate: _Candidate,
    manager: pluggy.PluginManager,
    registries: Registries,
    settings: PluginSettings,
    owners: dict[tuple[str, str], tuple[str, str]],
) -> None:
    plugin = candidate.plugin
    if candidate.entry_point is not None:
        try:
            plugin = candidate.entry_point.load()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # sys.exit() in a plugin must not end ollm
            _fail(registries, settings, candidate, "import", describe_failure(exc), exc)
            return
    try:
        _check_hook_names(manager, plugin)
        manager.register(plugin, name=candidate.name)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        _fail(registries, settings, candidate, "register", describe_failure(exc), exc)
        return

    hooks = tuple(
        h
        for h in HOOKS
        if any(i.plugin is plugin for i in getattr(manager.hook, h).get_hookimpls())
    )
    candidate.record["hooks"] = hooks
    contribution = _Contribution()
    for hook in hooks:
        impl = next(i for i in getattr(manager.hook, hook).get_hookimpls() if i.plugin is plugin)
        try:
            _collect(hook, impl.function(), contribution, registries)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            manager.unregister(plugin)
            _fail(registries, settings, candidate, hook, describe_failure(exc), exc)
            return
    skipped = _settle_clashes(contribution, registries, candidate, settings, owners)
    if skipped and settings.strict:
        manager.unregister(plugin)
        _fail(registries, settings, candidate, "register", "; ".join(skipped))
        return
    _commit(contribution, registries, candidate.name)
    registries.plugins.append(
        PluginRecord(
            name=candidate.name,
            status="loaded",
            contributes=_summary(contribution),
            skipped=tuple(skipped),
            **candidate.record,
        )
    )


def _check_hook_names(manager: pluggy.PluginManager, plugin: object) -> None:
    """A misspelt hook would be ignored in silence; say so instead."""
    for attr in dir(plugin):
        if attr in HOOKS or manager.parse_hookimpl_opts(plugin, attr) is None:
            continue
        import difflib  # only for this message: it is slow to import

        close = difflib.get_close_matches(attr, HOOKS, n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        raise ValueError(
            f"{attr} is marked @ollm.hookimpl but is not a hook of ollm.{hint} "
            f"The hooks are: {', '.join(HOOKS)}."
        )


def _collect(hook: str, result: object, into: _Contribution, registries: Registries) -> None:
    if result is None:
        return
    if isinstance(result, (str, bytes)) or not isinstance(result, Iterable):
        raise TypeError(f"{hook}() must return a list, not {type(result).__name__}")
    for item in result:
        if hook == "ollm_providers":
            into.providers.append(_provider_spec(item))
        elif hook == "ollm_tools":
            into.tools.append(_tool(item))
        elif hook == "ollm_token_counters":
            into.token_counters.append(_expect(item, TokenCounterSpec, hook))
        elif hook == "ollm_toolsets":
            into.toolsets.append(_expect(item, ToolsetSpec, hook))
        elif hook == "ollm_middleware":
            into.middleware.append(_expect(item, MiddlewareSpec, hook))
        elif hook == "ollm_output_strategies":
            into.outputs.append(_expect(item, OutputStrategySpec, hook))
        elif hook == "ollm_compactors":
            into.compactors.append(_expect(item, CompactorSpec, hook))
        elif hook == "ollm_commands":
            into.commands.append(_command(item))
        else:
            into.strategies.append(_expect(item, StrategySpec, hook))


def _provider_spec(item: object) -> ProviderSpec:
    if isinstance(item, ProviderSpec):
        return item
    name = getattr(item, "name", None)
    if isinstance(name, str) and name and callable(getattr(item, "chat_stream", None)):
        return ProviderSpec(name=name, factory=lambda: item)  # type: ignore[arg-type,return-value]
    raise TypeError(
        f"ollm_providers() returned {type(item).__name__}; expected ProviderSpec or a provider"
    )


def _tool(item: object) -> Tool:
    if isinstance(item, Tool):
        return item
    if callable(item):
        return Tool.from_function(item)
    raise TypeError(f"ollm_tools() returned {type(item).__name__}; expected a Tool or a function")


def _command(item: object) -> CommandSpec:
    spec: CommandSpec = _expect(item, CommandSpec, "ollm_commands")
    # A command's name is a word of the command line: one that argparse cannot take,
    # or one that looks like an option, would break `ollm --help` for everyone.
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,31}", spec.name):
        raise ValueError(
            f"ollm_commands() returned the command name {spec.name!r}: use lower-case "
            "letters, digits and '-', starting with a letter"
        )
    if not callable(spec.configure) or not callable(spec.run):
        raise TypeError(
            f"ollm_commands(): the command {spec.name!r} needs callable configure and run"
        )
    return spec


def _expect(item: object, kind: type[Any], hook: str) -> Any:
    if not isinstance(item, kind):
        raise TypeError(f"{hook}() returned {type(item).__name__}; expected {kind.__name__}")
    return item


def _settle_clashes(
    contribution: _Contribution,
    registries: Registries,
    candidate: _Candidate,
    settings: PluginSettings,
    owners: dict[tuple[str, str], tuple[str, str]],
) -> list[str]:
    """Drop from ``contribution`` each item whose name is taken (see the module's rule).

    Returns one message per dropped item. An item the user chose for this plugin
    replaces the one already registered.
    """
    me = (candidate.name, _origin(candidate.record))
    skipped: list[str] = []

    def keep(kind: str, name: str, taken: Callable[[str], bool]) -> bool:
        key = (kind, name.casefold())
        variable = choice_variable(kind, name)
        chosen = settings.choices.get(variable)
        owner = owners.get(key)
        if owner is None and taken(name):
            owner = ("the application", "registered by hand")
        if chosen is not None and chosen != candidate.name:
            skipped.append(
                f"{kind} {name!r} skipped: {variable}={chosen} chooses another plugin for it"
            )
            return False
        if owner is not None and chosen != candidate.name:
            first = " (ollm's own)" if _canonical(owner[1].split(" ")[0]) in FIRST_PARTY else ""
            skipped.append(
                f"{kind} {name!r} skipped: plugin {owner[0]!r} ({owner[1]}){first} provides "
                f"it already; to use this plugin's instead, set {variable}={candidate.name}"
            )
            return False
        owners[key] = me
        return True

    tools = {n.lower(): n for n in registries.tools.list()}
    contribution.providers = [
        s
        for s in contribution.providers
        if keep("provider", s.name, lambda n: n in registries.providers)  # any case
    ]
    contribution.tools = [
        t for t in contribution.tools if keep("tool", t.name, lambda n: n.lower() in tools)
    ]
    contribution.toolsets = [
        t
        for t in contribution.toolsets
        if keep("toolset", t.name, lambda n: n in registries.toolsets)
    ]
    contribution.strategies = [
        s
        for s in contribution.strategies
        if keep("strategy", s.name, lambda n: n in registries.strategies or n == "native")
    ]
    contribution.middleware = [
        m
        for m in contribution.middleware
        if keep("middleware", m.name, lambda n: n in registries.middleware)
    ]
    contribution.outputs = [
        o
        for o in contribution.outputs
        if keep(
            "output strategy",
            o.name,
            lambda n: n in registries.output_strategies or n in OUTPUT_BUILT_IN,
        )
    ]
    contribution.compactors = [
        c
        for c in contribution.compactors
        if keep("compactor", c.name, lambda n: n in registries.compactors)
    ]
    contribution.commands = [
        c
        for c in contribution.commands
        if keep("command", c.name, lambda n: n in registries.commands or n in BUILT_IN_COMMANDS)
    ]
    return skipped


def _origin(record: dict[str, Any]) -> str:
    if record.get("distribution"):
        return f"{record['distribution']} {record.get('version') or ''}".strip()
    return "registered by hand"


def _commit(contribution: _Contribution, registries: Registries, plugin: str) -> None:
    # An item the user chose over one already registered replaces it (same name, any case).
    for spec in contribution.providers:
        registries.providers.register(spec, replace=True)
    tools = {n.lower(): n for n in registries.tools.list()}
    for tool in contribution.tools:
        if tool.name.lower() in tools:
            registries.tools.unregister(tools[tool.name.lower()])
        registries.tools.register(tool, pack=plugin)
    for counter in contribution.token_counters:
        registries.token_counters.register(counter)
    for strategy in contribution.strategies:
        registries.strategies.register(strategy, replace=True)
    for toolset in contribution.toolsets:
        registries.toolsets.register(toolset, replace=True)
    for middleware in contribution.middleware:
        registries.middleware.register(middleware, replace=True)
    for output in contribution.outputs:
        registries.output_strategies.register(output, replace=True)
    for compactor in contribution.compactors:
        registries.compactors.register(compactor, replace=True)
    for command in contribution.commands:
        registries.commands.register(command, replace=True)


def _summary(contribution: _Contribution) -> dict[str, list[str]]:
    summary = {
        "providers": [s.name for s in contribution.providers],
        "tools": [t.name for t in contribution.tools],
        "token_counters": [c.pattern for c in contribution.token_counters],
        "tool_strategies": [s.name for s in contribution.strategies],
        "toolsets": [s.name for s in contribution.toolsets],
        "middleware": [m.name for m in contribution.middleware],
        "output_strategies": [o.name for o in contribution.outputs],
        "compactors": [c.name for c in contribution.compactors],
        "commands": [c.name for c in contribution.commands],
    }
    return {k: v for k, v in summary.items() if v}


def _fail(
    registries: Registries,
    settings: PluginSettings,
    candidate: _Candidate,
    phase: str,
    error: str,
    exc: BaseException | None = None,
) -> None:
    if exc is not None:
        # `--debug` shows where a plugin failed (the record keeps only the message).
        log.debug("plugin %r failed at %s", candidate.name, phase, exc_info=exc)
    record = PluginRecord(
        name=candidate.name, status="failed", phase=phase, error=error, **candidate.record
    )
    registries.plugins.append(record)
    where = f" ({record.distribution} {record.version})" if record.distribution else ""
    message = f"Plugin {candidate.name!r}{where} failed at {phase}: {error}"
    if settings.strict:
        raise PluginError(message)
    log.warning("%s; it was skipped", message)
