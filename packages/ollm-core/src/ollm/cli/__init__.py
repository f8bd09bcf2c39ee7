"""The ``ollm`` command line: one consumer of the runtime's event stream.

Only ``argparse`` and this package load before a command runs; each command imports what
it needs (the runtime, a provider, a progress bar) when it is chosen, so ``ollm --help``
starts at once and never imports an HTTP client.

Internal: not part of ollm's public API (the ``ollm`` command is the interface, not
these modules); its layout may change in any release.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ollm.cli.terminal import Terminal

__all__ = ["main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ollm`` with ``argv`` (default: the process's arguments); return the exit code."""
    from ollm.cli.parser import build_parser, check_leftovers
    from ollm.cli.terminal import Terminal, replace_undecodable

    terminal = Terminal()
    # Bytes of the arguments that are not text arrive as lone surrogates
    # (surrogateescape): each becomes U+FFFD here, with a note, before anything uses it.
    words: list[str] = []
    replaced = 0
    for given in sys.argv[1:] if argv is None else argv:
        word, count = replace_undecodable(given)
        words.append(word)
        replaced += count
    terminal.note_replaced(replaced, "the command line", sys.getfilesystemencoding())
    _replace_undecodable_settings(terminal)
    parser = build_parser(words)
    try:
        args, leftovers = parser.parse_known_args(words)
        # Reported by the command they were given to, with its usage (not ollm's).
        check_leftovers(parser, args, leftovers)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.version:
        from ollm._version import __version__

        print(f"ollm {__version__}")
        return EXIT_OK
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if args.command == "models" and args.action is None:
        with contextlib.redirect_stdout(sys.stderr), contextlib.suppress(SystemExit):
            parser.parse_args(["models", "--help"])
        return EXIT_USAGE

    _configure_logging(args.debug)
    try:
        return _dispatch(args, terminal)
    except KeyboardInterrupt:
        terminal.end_line()
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`ollm ... | head`): not an error of ours.
        _silence_stdout()
        return EXIT_OK
    except OSError as exc:
        if args.debug or exc.errno not in _WRITE_ERRORS:
            return _unexpected(exc, args.debug, terminal)
        # Writing the answer failed: a full disk, a closed terminal, a lost mount.
        _silence_stdout()
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        terminal.error(
            f"cannot write the output{where}: {exc.strerror or exc}. Free some space or "
            "send the output elsewhere."
        )
        return EXIT_ERROR
    except BaseExceptionGroup as group:
        if group.subgroup(KeyboardInterrupt) is None:
            raise
        terminal.end_line()  # a task's Ctrl-C, grouped with what its siblings raised
        return EXIT_INTERRUPTED
    except Exception as exc:
        if _after_interrupt(exc) and not args.debug:
            # Ctrl-C was pressed and something failed on the way out (closing a stream
            # that was still pouring in, say): the person asked to stop, and did.
            terminal.warn(f"while stopping: {type(exc).__name__}: {exc}")
            return EXIT_INTERRUPTED
        return _unexpected(exc, args.debug, terminal)
    finally:
        if argv is None:
            _ignore_further_interrupts()


def _after_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while a Ctrl-C was being handled (its cause or context,
    however deep, is a ``KeyboardInterrupt``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


# The environment variables of ollm and of its own plugins (models, hosts, files...).
_SETTINGS = ("OLLM_", "OLLAMA_", "OPENAI_", "GEMINI_", "GOOGLE_")


def _replace_undecodable_settings(terminal: Terminal) -> None:
    """The settings in the environment get what the arguments get: U+FFFD for each byte
    that is not text, and a note naming the variables."""
    from ollm.cli.terminal import replace_undecodable

    replaced = 0
    names = []
    for name, value in list(os.environ.items()):
        if name.startswith(_SETTINGS):
            clean, count = replace_undecodable(value)
            if count:
                os.environ[name] = clean
                replaced += count
                names.append(name)
    source = f"the environment ({', '.join(sorted(names))})"
    terminal.note_replaced(replaced, source, sys.getfilesystemencoding())


# Failures to write the output that are the machine's, not ollm's.
_WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT, errno.EFBIG})


def _unexpected(exc: BaseException, debug: bool, terminal: Terminal) -> int:
    from ollm.errors import OllmError

    if isinstance(exc, OllmError):
        terminal.error(exc.message, exc.code)
        if debug:
            import traceback

            traceback.print_exc()
        return EXIT_ERROR
    if debug:
        raise exc
    terminal.error(
        f"unexpected {type(exc).__name__}: {exc}. Run again with --debug to see where, "
        "and please report it."
    )
    return EXIT_ERROR


def _dispatch(args: object, terminal: object) -> int:
    command = getattr(args, "command", None)
    if getattr(args, "plugin_command", None) is not None:
        from ollm.cli.config import CliConfig
        from ollm.cli.plugin_commands import run_plugin_command

        return run_plugin_command(args, CliConfig.from_args(args).backend)  # type: ignore[arg-type]
    if command == "chat":
        from ollm.cli.chat import run_chat

        return run_chat(args, terminal)  # type: ignore[arg-type]
    if command == "models":
        from ollm.cli.models import run_models

        return run_models(args, terminal)  # type: ignore[arg-type]
    if command == "logs":
        from ollm.cli.logs import run_logs

        return run_logs(args, terminal)  # type: ignore[arg-type]
    from ollm.cli.inventory import run_plugins, run_tools

    if command == "plugins":
        return run_plugins(args, terminal)  # type: ignore[arg-type]
    return run_tools(args, terminal)  # type: ignore[arg-type]


def _configure_logging(debug: bool) -> None:
    import logging

    # Plugins log under their own names (ollm_ollama...), so the root logger takes it all:
    # ollm's warnings as one line each, everything with --debug. Other libraries' records
    # (urllib3's retries under an exporter, say) are raw lines that name no next step:
    # only --debug shows them.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            "%(levelname)s %(name)s: %(message)s" if debug else "warning: %(message)s"
        )
    )
    if not debug:
        handler.addFilter(lambda record: record.name.split(".", 1)[0].startswith("ollm"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)


def _ignore_further_interrupts() -> None:
    """The process is on its way out: a late Ctrl-C must not turn exit 130 into a crash."""
    import signal

    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
