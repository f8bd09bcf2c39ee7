"""``ollm plugins`` and ``ollm tools``: what is installed, and in what state."""

from __future__ import annotations

import argparse

import msgspec

from ollm.cli import EXIT_OK
from ollm.cli.config import load_registries
from ollm.cli.terminal import Terminal

__all__ = ["run_plugins", "run_tools"]

_STATUS_STYLE = {"loaded": "green", "failed": "red", "blocked": "yellow", "disabled": "yellow"}


def run_plugins(args: argparse.Namespace, terminal: Terminal) -> int:
    """Every plugin with its distribution, version, hooks and status."""
    # Never strict here: this is the command that shows what failed.
    registries = load_registries(strict=False)
    records = sorted(registries.plugins, key=lambda r: r.name)
    if args.json:
        terminal.write(msgspec.json.encode(records).decode() + "\n")
        return EXIT_OK
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
        elif record.status == "failed":
            line += f"  failed at {record.phase}: {record.error}"
        elif record.status == "blocked":
            line += "  (blocked by OLLM_PLUGINS / OLLM_BLOCK_PLUGINS)"
        else:
            line += "  (autoload is off: OLLM_DISABLE_PLUGIN_AUTOLOAD)"
        terminal.write(line + "\n")
    default = registries.providers.default_name
    if default:
        terminal.write(f"\nDefault provider: {default}\n")
    return EXIT_OK


def run_tools(args: argparse.Namespace, terminal: Terminal) -> int:
    """The tools of every tool pack, with their schemas."""
    registries = load_registries()
    tools = registries.tools.tools()
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
        return EXIT_OK
    if not tools:
        terminal.write("No tools are installed.\n")
        return EXIT_OK
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
    terminal.write("Use one with: ollm chat -t NAME ...\n")
    return EXIT_OK


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
