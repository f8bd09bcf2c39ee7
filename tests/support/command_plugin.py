"""A plugin with commands, for the tests of ``ollm_commands``.

- ``greet``: sync, ``--name``; prints a greeting and exits 3 with ``--fail``;
- ``where``: async; prints the async backend it runs on;
- ``chat``: takes the name of ollm's own command (must be skipped);
- ``broken``: its ``configure`` raises.

Each call of the hook, of ``configure`` and of ``run`` appends a line to the file
``$COMMAND_PLUGIN_TRACE``, so that tests see what ran.
"""

from __future__ import annotations

import argparse
import os

import ollm


def _trace(what: str) -> None:
    path = os.environ.get("COMMAND_PLUGIN_TRACE")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(what + "\n")


def _configure_greet(parser: argparse.ArgumentParser) -> None:
    _trace("configure greet")
    parser.add_argument("--name", default="world")
    parser.add_argument("--fail", action="store_true")


def _greet(args: argparse.Namespace) -> int:
    _trace("run greet")
    print(f"hello, {args.name}")
    return 3 if args.fail else 0


def _configure_where(parser: argparse.ArgumentParser) -> None:
    _trace("configure where")


async def _where(args: argparse.Namespace) -> None:
    import sniffio

    print(sniffio.current_async_library())


def _configure_broken(parser: argparse.ArgumentParser) -> None:
    raise RuntimeError("no arguments today")


@ollm.hookimpl
def ollm_commands() -> list[ollm.CommandSpec]:
    _trace("hook")
    return [
        ollm.CommandSpec("greet", "say hello", _configure_greet, _greet),
        ollm.CommandSpec("where", "name the async backend", _configure_where, _where),
        ollm.CommandSpec("chat", "a clash with ollm's own", _configure_greet, _greet),
        ollm.CommandSpec("broken", "fails to configure", _configure_broken, _greet),
    ]
