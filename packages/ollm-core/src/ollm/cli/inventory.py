"""``ollm plugins`` and ``ollm tools``: what is installed, and in what state."""

from __future__ import annotations

import argparse
import os

import msgspec

from ollm.cli import EXIT_ERROR, EXIT_OK
from ollm.cli.config import CliConfig, load_registries, strategy_names
from ollm.cli.terminal import Terminal
from ollm.cli.toolsets import ToolsetListing, load_toolsets
from ollm.errors import ErrorCode, OllmError
from ollm.plugins.settings import ENV_STRICT, PluginSettings
from ollm.tools.tool import Tool
from ollm.tools.toolset import Toolset
from ollm.types.specs import PluginRecord

__all__ = ["run_plugins", "run_tools"]

_STATUS_STYLE = {"loaded": "green", "failed": "red", "blocked": "yellow", "disabled": "yellow"}


def run_plugins(args: argparse.Namespace, terminal: Terminal) -> int:
    """Every plugin with its distribution, version, hooks and status."""
    # Never strict here: this is the command that shows what failed.
    registries = load_registries(strict=False)
    records = sorted(registries.plugins, key=lambda r: r.name)
    if args.json:
        terminal.write(msgspec.json.encode(records).decode() + "\n")
        return _strict_exit(records, terminal)
    if not records:
        terminal.write("No plugins are installed. Try: pip install ollm-ollama\n")
        return EXIT_OK
    width = max(len(r.name) for r in records)
    for record in records:
        origin = f"{record.distribution} {record.version}" if record.distribution else "(by hand)"
        status = terminal.style(f"{record.status:8}", _STATUS_STYLE[record.status], stream="out")
        line = f"{record.name:{width}}  {status}  {origin}"
        if record.status == "loaded":
            parts = [f"{kind}: {', '.join(names)}" for kind, names in record.contributes.items()]
            if parts:
                line += f"  ({'; '.join(parts)})"
            for note in record.skipped:
                line += f"\n{'':{width}}  {note}"
        elif record.status == "failed":
            line += f"  failed at {record.phase}: {record.error}"
        elif record.status == "blocked":
            line += "  (blocked by OLLM_PLUGINS / OLLM_BLOCK_PLUGINS)"
        else:
            line += "  (autoload is off: OLLM_DISABLE_PLUGIN_AUTOLOAD)"
        terminal.write(line + "\n")
    default = registries.providers.default_name
    terminal.write("\n")
    if default:
        terminal.write(f"Default provider: {default}\n")
    strategies = ", ".join(strategy_names(registries))
    terminal.write(f"Tool strategies (ollm chat --tool-strategy NAME): {strategies}\n")
    return _strict_exit(records, terminal)


def _strict_exit(records: list[PluginRecord], terminal: Terminal) -> int:
    """Under OLLM_STRICT_PLUGINS=1, a plugin that failed makes the command fail too."""
    failed = [r.name for r in records if r.status == "failed"]
    if failed and PluginSettings.from_env(os.environ).strict:
        terminal.error(
            f"{len(failed)} plugin(s) failed to load ({', '.join(failed)}), and "
            f"{ENV_STRICT} is set. Run with --debug to see where.",
            ErrorCode.PLUGIN_ERROR,
        )
        return EXIT_ERROR
    return EXIT_OK


def run_tools(args: argparse.Namespace, terminal: Terminal) -> int:
    """The tools of every tool pack and of the toolsets given, with their schemas, each
    once, under the name a chat offers it by, with where it comes from.

    Each toolset is opened (an MCP server started) to list its tools, then closed. One
    that fails is reported on stderr, the others are listed, and the exit code is 1.
    """
    registries = load_registries()
    tools = registries.tools.tools()
    toolsets = load_toolsets(args, registries)
    failures: list[OllmError] = []
    if toolsets:
        from ollm.runtime.toolsets import name_toolset_tools

        listing: list[tuple[Toolset, dict[str, Tool]]] = []
        for toolset, found in _list_toolsets(toolsets, CliConfig.from_args(args).backend):
            if isinstance(found, OllmError):
                failures.append(found)
            else:
                listing.append((toolset, found))
        # Each tool once, under the name a chat offers it by (a clash renames the later).
        named, said = name_toolset_tools({t.name: t for t in tools}, listing)
        for message in said:
            terminal.warn(message)
        for toolset, _ in listing:
            tools.extend(named[id(toolset)].values())
    for failure in failures:
        terminal.error(failure.message, failure.code)
    code = EXIT_ERROR if failures else EXIT_OK
    if args.json:
        payload = [
            {
                "name": t.name,
                "pack": t.pack,
                "description": t.description,
                "parameters": t.parameters,
            }
            for t in tools
        ]
        terminal.write(msgspec.json.encode(payload).decode() + "\n")
        return code
    if not tools:
        if not failures:
            terminal.write("No tools are installed.\n")
        return code
    for tool in tools:
        name = terminal.style(tool.name, "bold", stream="out")
        terminal.write(f"{name}  (from {tool.pack or 'the application'})\n")
        if tool.description:
            for line in tool.description.splitlines():
                terminal.write(f"    {line}\n" if line else "\n")
        props = tool.parameters.get("properties", {})
        required = set(tool.parameters.get("required", ()))
        for key, spec in props.items():
            kind = _kind(spec)
            need = "required" if key in required else "optional"
            about = spec.get("description", "")
            terminal.write(f"    - {key} ({kind}, {need}){': ' + about if about else ''}\n")
        terminal.write("\n")
    hint = " (or a glob: -t 'NAME_*')" if toolsets else ""
    terminal.write(f"Use one with: ollm chat -t NAME ...{hint}\n")
    return code


def _list_toolsets(toolsets: list[Toolset], backend: str) -> ToolsetListing:
    """Open the toolsets in an event loop of their own, list their tools, close them."""
    from anyio.from_thread import start_blocking_portal

    from ollm.cli.toolsets import list_toolsets
    from ollm.runtime.toolsets import ToolsetSessions

    sessions = ToolsetSessions()
    with start_blocking_portal(backend) as portal:
        try:
            return portal.call(list_toolsets, toolsets, sessions)
        finally:
            portal.call(sessions.aclose)


def _kind(spec: dict[str, object]) -> str:
    """A short name for a parameter's JSON Schema type."""
    kind = spec.get("type")
    if isinstance(kind, str):
        return kind
    if "enum" in spec:
        return "one of " + ", ".join(str(v) for v in spec["enum"])  # type: ignore[attr-defined]
    options = spec.get("anyOf")
    if isinstance(options, list):
        kinds = [_kind(o) for o in options if isinstance(o, dict) and o.get("type") != "null"]
        return " or ".join(kinds) if kinds else "any"
    return "any"
