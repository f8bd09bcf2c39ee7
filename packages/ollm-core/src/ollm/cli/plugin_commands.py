"""The sub-commands plugins add through ``ollm_commands`` (``ollm serve``...).

They cost nothing until they run: the built-in commands never discover them, and a
plugin command's ``configure`` and ``run`` are called only when it is the one named.
Plugins are discovered only when the command line may name one of theirs: no command
(``ollm --help``), or a word that is not one of ollm's own commands.

Internal: not part of ollm's public API (the ``ollm`` command is the interface).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Awaitable, Sequence
from typing import Any

__all__ = ["add_plugin_commands", "command_word", "run_plugin_command"]

log = logging.getLogger(__name__)

# ollm's own commands (ollm.registries.commands.BUILT_IN_COMMANDS, not imported: this
# module is imported at every start, the registries are not).
_BUILT_IN = frozenset({"chat", "models", "logs", "plugins", "tools"})
# ollm's options that take a value, before the command word.
_VALUED = frozenset({"--backend"})


def command_word(words: Sequence[str]) -> str | None:
    """The word of ``words`` that names the command, if any."""
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _VALUED:
            skip = True
        elif word == "--":
            continue
        elif not word.startswith("-"):
            return word
    return None


def add_plugin_commands(commands: Any, words: Sequence[str]) -> None:
    """Add plugins' commands to ``commands`` (the sub-parsers' action) when ``words``
    may name one; configure only the one they name."""
    chosen = command_word(words)
    if chosen in _BUILT_IN:
        return
    from ollm.cli.config import load_registries

    # Not strict: a broken plugin must never break `ollm --help` (llm's issue 1280).
    for spec in load_registries(strict=False).commands.specs():
        parser = commands.add_parser(
            spec.name, help=spec.help, description=spec.description or spec.help
        )
        parser.set_defaults(plugin_command=spec, plugin_failure=None, _parser=parser)
        if spec.name != chosen:
            continue
        try:
            spec.configure(parser)
        except Exception as exc:
            log.debug("the command %r failed to configure", spec.name, exc_info=exc)
            parser.set_defaults(plugin_failure=f"{type(exc).__name__}: {exc}")


def run_plugin_command(args: argparse.Namespace, backend: str) -> int:
    """Run the plugin command ``args`` chose, on ``backend`` when it is async."""
    from ollm.errors import PluginError

    spec = args.plugin_command
    if args.plugin_failure is not None:
        raise PluginError(
            f"The command {spec.name!r} failed to set up its arguments: "
            f"{args.plugin_failure}. Run `ollm plugins` to see which plugin adds it, and "
            "report this to its author."
        )
    result = spec.run(args)
    if isinstance(result, Awaitable):
        import anyio

        async def wait() -> Any:
            return await result

        result = anyio.run(wait, backend=backend)
    if result is None:
        return 0
    if isinstance(result, bool) or not isinstance(result, int):
        raise PluginError(
            f"The command {spec.name!r} returned {type(result).__name__}, not an exit code. "
            "Report this to its author (`ollm plugins` says which plugin adds it)."
        )
    return result
