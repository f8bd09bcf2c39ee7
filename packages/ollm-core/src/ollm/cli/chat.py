"""``ollm chat``: one prompt, or an interactive session that keeps the history.

The event loop runs in a background thread (anyio's blocking portal) and this thread
reads input and draws output, so Ctrl-C is an ordinary KeyboardInterrupt here: the
first one aborts the reply in progress (it ends ``cancelled``), a second one exits 130.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from typing import TextIO

from anyio.from_thread import BlockingPortal, start_blocking_portal

from ollm.cli import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from ollm.cli.config import CliConfig, load_registries
from ollm.cli.driving import drive
from ollm.cli.render import EventRenderer
from ollm.cli.terminal import Terminal
from ollm.cli.toolsets import load_toolsets
from ollm.errors import (
    ConnectionFailedError,
    InvalidRequestError,
    OllmError,
    RequestTimeoutError,
)
from ollm.registries import Registries
from ollm.runtime.client import ChatClient, ChatStream
from ollm.types.events import ErrorEvent, FinishEvent
from ollm.types.provider import ModelManagement
from ollm.types.request import GenerationOptions

__all__ = ["run_chat"]

# A line that is one /word is a command, never sent to the model ("/usr/bin?" is sent).
_COMMAND = re.compile(r"/[A-Za-z]+")
_HELP = (
    "Commands: /clear starts a new conversation; /exit (or /quit, /bye, Ctrl-D, Ctrl-C twice) "
    "leaves; /help shows this. Anything else is sent to the model."
)

_THINK: dict[str, bool | str] = {
    "on": True,
    "off": False,
    "low": "low",
    "medium": "medium",
    "high": "high",
}


def run_chat(args: argparse.Namespace, terminal: Terminal, stdin: TextIO | None = None) -> int:
    """Run ``ollm chat``; return the exit code."""
    stdin = stdin or sys.stdin
    config = CliConfig.from_args(args)
    prompt = _read_prompt(args.prompt, stdin)
    if prompt is not None and not prompt.strip():
        terminal.error(
            "the prompt is empty (standard input gave nothing). Give the text as an argument, "
            'or pipe some in: ollm chat -m MODEL "your question"'
        )
        return EXIT_USAGE
    interactive = prompt is None and _isatty(stdin)
    if prompt is None and not interactive:
        terminal.error('no prompt given. Try: ollm chat -m MODEL "your question"')
        return EXIT_USAGE
    if interactive and args.json:
        terminal.error("--json needs a prompt (interactive sessions are for people).")
        return EXIT_USAGE

    renderer = EventRenderer(terminal, json=args.json, show_thinking=not args.hide_thinking)
    try:
        return _run(args, config, prompt, interactive, renderer, terminal)
    except OllmError as exc:
        if args.json and renderer.finish is None:
            # A failure before the chat began still ends the event stream as usual.
            renderer(ErrorEvent(exc.message, exc.code))
            renderer(FinishEvent("error"))
        raise


def _run(
    args: argparse.Namespace,
    config: CliConfig,
    prompt: str | None,
    interactive: bool,
    renderer: EventRenderer,
    terminal: Terminal,
) -> int:
    registries = load_registries()
    toolsets = load_toolsets(args, registries)
    if toolsets and not args.tools:
        example = f"-t '{toolsets[0].name}_*'"
        terminal.info(f"note: no tool is offered; pick the toolsets' tools with {example}", "dim")
    client = ChatClient(
        registries,
        provider=config.provider,
        model=config.model,
        system=args.system,
        tools=list(args.tools),
        options=GenerationOptions(
            temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed
        ),
        max_turns=args.max_turns or 10,
        context_window=args.context_window,
        tool_strategy="react" if args.react else "auto",
        recover_text_tool_calls=not args.no_recover,
        think=_THINK[args.think] if args.think else None,
        toolsets=toolsets,
    )
    with start_blocking_portal(config.backend) as portal:
        try:
            _check_model(client, registries, config, portal)
            if interactive:
                return _interactive(client, portal, renderer, terminal, config)
            return _exit_code(_stream(client.chat(prompt), portal, renderer, terminal))
        finally:
            portal.call(client.aclose)


def _local_command(text: str, client: ChatClient, terminal: Terminal) -> bool:
    """Run ``text`` if it is an interactive command (one /word); say whether it was."""
    if not _COMMAND.fullmatch(text):
        return False
    if text == "/clear":
        client.new_conversation()
        terminal.info("(a new conversation)", "dim")
        return True
    if text != "/help":
        terminal.info(f"{text} is not a command here.", "dim")
    terminal.info(_HELP, "dim")
    return True


def _read_prompt(prompt: str | None, stdin: TextIO) -> str | None:
    """PROMPT, '-' for stdin, or piped text (put before PROMPT when both are given)."""
    if prompt == "-":
        return stdin.read()
    piped = None if _isatty(stdin) else stdin.read()
    if piped is not None and not piped.strip():
        piped = None
    if prompt and piped:
        return f"{piped.rstrip()}\n\n{prompt}"
    return prompt or piped


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _check_model(
    client: ChatClient, registries: Registries, config: CliConfig, portal: BlockingPortal
) -> None:
    """Say which models exist when none was chosen, before anything is sent."""
    if config.model:
        return
    provider = registries.providers.get(config.provider)
    if getattr(provider, "default_model", None):
        return
    hint = ""
    if isinstance(provider, ModelManagement):
        try:
            names = [m.name for m in portal.call(provider.list_models)]
        except (ConnectionFailedError, RequestTimeoutError):
            raise  # the server is down: that is the first thing to fix
        except Exception:
            names = []
        if names:
            hint = f" Your models: {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}."
        else:
            hint = " You have none yet: ollm models pull llama3.2"
    raise InvalidRequestError(
        f"no model chosen. Pass -m MODEL, or set OLLM_MODEL.{hint}", provider=provider.name
    )


def _stream(
    stream: ChatStream,
    portal: BlockingPortal,
    renderer: EventRenderer,
    terminal: Terminal,
) -> FinishEvent | None:
    """Draw a chat's events as they come; Ctrl-C once aborts it, twice gives up."""

    def interrupted() -> None:
        stream.abort("interrupted")
        if not renderer.json:
            terminal.info("stopping... (Ctrl-C again to quit)", "dim")

    renderer.finish = None
    drive(portal, stream.__aiter__(), renderer, interrupted)
    return renderer.finish


def _exit_code(finish: FinishEvent | None) -> int:
    if finish is None:
        return EXIT_ERROR
    if finish.reason == "cancelled":
        return EXIT_INTERRUPTED
    if finish.reason in ("error", "token_limit"):
        return EXIT_ERROR
    return EXIT_OK


def _interactive(
    client: ChatClient,
    portal: BlockingPortal,
    renderer: EventRenderer,
    terminal: Terminal,
    config: CliConfig,
) -> int:
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401 - line editing and history for input()
    provider = client.registries.providers.get(config.provider)
    model = config.model or getattr(provider, "default_model", "")
    terminal.info(
        f"Chatting with {model} via {provider.name}. /help lists the commands; /exit, Ctrl-D "
        "or Ctrl-C twice leaves.",
        "dim",
    )
    interrupted = False
    while True:
        try:
            line = input(terminal.style("> ", "bold", stream="out") if terminal.out_color else "> ")
            text = line.strip()
            if text:
                interrupted = False
            if text in ("/exit", "/quit", "/bye"):
                return EXIT_OK
            if not text or _local_command(text, client, terminal):
                continue  # (a Ctrl-C while a local command runs counts as at the prompt)
        except EOFError:
            terminal.end_line()
            return EXIT_OK
        except KeyboardInterrupt:
            terminal.end_line()
            if interrupted:
                return EXIT_INTERRUPTED
            interrupted = True
            terminal.info("(Ctrl-C again, /exit or Ctrl-D to leave)", "dim")
            continue
        finish = _stream(client.chat(text), portal, renderer, terminal)
        terminal.end_line()
        if finish is not None and finish.reason == "cancelled":
            continue
