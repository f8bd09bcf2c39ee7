"""``ollm chat``: one prompt, or an interactive session that keeps the history.

The event loop runs in a background thread (anyio's blocking portal) and this thread
reads input and draws output, so Ctrl-C is an ordinary KeyboardInterrupt here: the
first one aborts the reply in progress (it ends ``cancelled``), a second one exits 130.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from anyio.from_thread import BlockingPortal, start_blocking_portal

from ollm.cli import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from ollm.cli.chatlog import ChatLog
from ollm.cli.config import (
    TRACE_MIDDLEWARE,
    CliConfig,
    load_registries,
    strategy_names,
    with_tracing,
)
from ollm.cli.driving import drive
from ollm.cli.render import EventRenderer
from ollm.cli.terminal import Terminal
from ollm.cli.toolsets import load_toolsets
from ollm.errors import (
    InvalidRequestError,
    OllmError,
    PluginError,
    PolicyError,
)
from ollm.registries import Registries
from ollm.registries.outputs import BUILT_IN
from ollm.registries.strategies import INSTALL_HINTS
from ollm.runtime.client import ChatClient, ChatStream
from ollm.runtime.conversation import Conversation
from ollm.types.events import (
    ApprovalRequestEvent,
    ChatEvent,
    CompactionEvent,
    ErrorEvent,
    FinishEvent,
    ToolDecisionEvent,
)
from ollm.types.provider import ModelManagement
from ollm.types.request import GenerationOptions

if TYPE_CHECKING:
    from ollm.cli.approval import TerminalQuestions
    from ollm.runtime.approval import Approver
    from ollm.tools.approval import ApprovalPolicy
    from ollm.tools.toolset import Toolset

__all__ = ["run_chat"]

# A line that is one /word is a command, never sent to the model ("/usr/bin?" is sent).
_COMMAND = re.compile(r"/[A-Za-z]+")
_HELP = (
    "Commands: /clear starts a new conversation; /compact leaves about half of it out of "
    "the next request (the log keeps everything); /exit (or /quit, /bye, Ctrl-D, Ctrl-C twice) "
    "leaves; /help shows this. Anything else is sent to the model. Every answer is logged "
    "(ollm logs; --no-log to not), and ollm chat -c goes on with this conversation later."
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
    prompt = _read_prompt(args.prompt, stdin, terminal)
    if prompt is not None and not prompt.strip():
        where = "standard input gave nothing" if args.prompt == "-" else "the argument is blank"
        terminal.error(
            f"the prompt is empty ({where}). Give the text as an argument, or pipe some in: "
            'ollm chat -m MODEL "your question"; with no prompt at all, at a terminal, '
            "the chat is interactive."
        )
        return EXIT_USAGE
    interactive = prompt is None and _isatty(stdin)
    if prompt is None and not interactive:
        terminal.error('no prompt given. Try: ollm chat -m MODEL "your question"')
        return EXIT_USAGE
    if interactive and args.json:
        terminal.error("--json needs a prompt (interactive sessions are for people).")
        return EXIT_USAGE

    if args.schema is None and (
        args.schema_multi or args.output_retries is not None or args.output_strategy
    ):
        terminal.error(
            "--schema-multi, --output-retries and --output-strategy go with --schema SCHEMA."
        )
        return EXIT_USAGE
    renderer = EventRenderer(
        terminal,
        json=args.json,
        show_thinking=not args.hide_thinking,
        output=args.schema is not None,
    )
    asking = stdin if _isatty(stdin) else None
    try:
        return _run(args, config, prompt, interactive, renderer, terminal, asking)
    except OllmError as exc:
        if args.json and renderer.finish is None:
            # A failure before the chat began still ends the event stream as usual.
            renderer(ErrorEvent(exc.message, exc.code))
            renderer(FinishEvent("error"))
        if isinstance(exc, PolicyError):
            # The user's own file, wrong: a usage error, like a bad flag.
            terminal.error(exc.message, exc.code)
            return EXIT_USAGE
        raise


def _run(
    args: argparse.Namespace,
    config: CliConfig,
    prompt: str | None,
    interactive: bool,
    renderer: EventRenderer,
    terminal: Terminal,
    asking: TextIO | None,
) -> int:
    """The chat; ``asking`` is the terminal's input where a person can answer questions."""
    registries = load_registries()
    if not _known_strategy(args, config, registries, terminal):
        return EXIT_USAGE
    config, tracer = _with_middleware(args, config, registries, terminal)
    toolsets = load_toolsets(args, registries)
    # Before the log opens and before any model is asked: a policy that cannot be read
    # stops the command here.
    approval, approver, questions = _approval(args, toolsets, terminal, asking)
    output = None
    if args.schema is not None:
        from ollm.cli.schema import schema_of  # typed output's modules, only when asked for

        output = schema_of(args.schema, multi=args.schema_multi)
    if toolsets and not args.tools:
        example = f"-t '{toolsets[0].name}_*'"
        terminal.info(f"note: no tool is offered; pick the toolsets' tools with {example}", "dim")
    log = ChatLog.open(args, terminal)
    try:
        system = args.system
        conversation = None
        resumed = log.resume(args)
        if resumed is not None:
            conversation, info = resumed
            # Going on where it was: its provider, model and system prompt, unless given
            # (another provider takes its own default model, not the logged one).
            provider = args.provider or info.provider or config.provider
            same = info.provider is None or provider == info.provider
            config = dataclasses.replace(
                config,
                provider=provider,
                model=args.model or (info.model if same else None) or config.model,
            )
            system = system or info.system
        if config.provider is None:
            # No -p, no OLLM_PROVIDER, nothing to go on with: Ollama, else the built-in model.
            from ollm.cli.choice import PullInterrupted, choose_provider

            try:
                config = choose_provider(
                    config, registries, terminal, asking=asking, recent=log.recent_models
                )
            except PullInterrupted:
                return EXIT_INTERRUPTED
        client = _client(
            args,
            config,
            registries,
            conversation=conversation,
            system=system,
            toolsets=toolsets,
            middleware=[*tracer, *config.middleware],
            approval=approval,
            approver=approver,
            output=output,
        )
        logged = _redacted_system(system, config.middleware, registries)
        session = _Session(client, registries, config, renderer, terminal, log, logged)
        session.output_schema = output
        session.questions = questions
        return _converse(session, registries, config, prompt, interactive)
    finally:
        log.close()


def _with_middleware(
    args: argparse.Namespace, config: CliConfig, registries: Registries, terminal: Terminal
) -> tuple[CliConfig, list[object]]:
    """The chat's middleware, checked installed; with the ``otel`` middleware built here
    (outermost) when the ``OTEL_*`` variables alone turn tracing on."""
    traced = with_tracing(
        config.middleware, asked=args.trace, installed=registries.middleware, environ=os.environ
    )
    tracer: list[object] = []  # the otel middleware built here, outermost
    if traced != config.middleware and not args.trace:
        # Turned on by the OTEL_* variables alone (set for other programs, perhaps): a
        # tracing set-up that cannot start is a warning, never a chat that fails. Built
        # once, here, and handed to the client as it is.
        try:
            tracer = [registries.middleware.create(TRACE_MIDDLEWARE)]
        except PluginError as exc:
            terminal.warn(
                f"traces are off: {exc.message} (unset OTEL_EXPORTER_OTLP_ENDPOINT "
                "and OTEL_TRACES_EXPORTER to silence this)"
            )
        traced = config.middleware
    config = dataclasses.replace(config, middleware=traced)
    for name in config.middleware:
        if name not in registries.middleware:
            known = ", ".join(registries.middleware.list()) or "none"
            hint = " Traces need ollm-otel: pip install 'ollm-otel[export]'." * (
                name == TRACE_MIDDLEWARE
            )
            raise PluginError(
                f"no middleware is named {name!r}. Installed: {known} (`ollm plugins` "
                f"lists them with the plugins they come from).{hint}"
            )
    return config, tracer


def _client(
    args: argparse.Namespace,
    config: CliConfig,
    registries: Registries,
    *,
    conversation: Conversation | None,
    system: str | None,
    toolsets: Sequence[Toolset],
    middleware: list[object],
    approval: ApprovalPolicy | None,
    approver: Approver | None,
    output: dict[str, Any] | None,
) -> ChatClient:
    """The chat's client, as the command line's options say."""
    return ChatClient(
        registries,
        provider=config.provider,
        model=config.model,
        system=system,
        tools=list(args.tools),
        options=GenerationOptions(
            temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed
        ),
        max_turns=args.max_turns or 10,
        context_window=args.context_window,
        tool_strategy=config.tool_strategy,
        recover_text_tool_calls=not args.no_recover,
        think=_THINK[args.think] if args.think else None,
        conversation=conversation,
        toolsets=toolsets,
        middleware=[*middleware, *_tool_selection(args)],
        middleware_timeout=args.middleware_timeout or 5.0,
        approval=approval,
        approver=approver,
        tool_call_deltas=args.call_deltas,
        output=output,
        output_retries=2 if args.output_retries is None else args.output_retries,
        output_strategy=args.output_strategy or "auto",
        on_truncation=args.on_truncation,
        compact=args.compact,
    )


def _converse(
    session: _Session,
    registries: Registries,
    config: CliConfig,
    prompt: str | None,
    interactive: bool,
) -> int:
    """The chat itself, in a portal's event loop: calls left unanswered first, then the
    prompt, or the interactive session; the exit code."""
    client, terminal, log = session.client, session.terminal, session.log
    with start_blocking_portal(config.backend) as portal:
        try:
            _check_model(client, registries, config, portal)
            unanswered = client.conversation.unanswered_calls
            if unanswered:
                # Stopped while asking about these: ask again, and go on from there.
                terminal.info(
                    f"(conversation {log.cid}: {len(unanswered)} tool call(s) were never "
                    "answered; deciding them now)",
                    "dim",
                )
                finish = session.exchange(client.chat(), portal)
                if interactive:
                    terminal.end_line()
                elif prompt is None or _exit_code(finish) != EXIT_OK:
                    return _exit_code(finish)
            if interactive:
                return _interactive(session, portal)
            return _exit_code(session.exchange(client.chat(prompt), portal))
        finally:
            portal.call(client.aclose)


def _known_strategy(
    args: argparse.Namespace, config: CliConfig, registries: Registries, terminal: Terminal
) -> bool:
    """Whether the tool strategy asked for is one there is, and the output strategy; if
    not, say which there are (refused even when no tool is offered: the name is wrong
    either way)."""
    output = args.output_strategy
    if output:
        outputs = list(dict.fromkeys([*BUILT_IN, *registries.output_strategies.list()]))
        if output not in outputs:
            terminal.error(
                f"--output-strategy {output}: no output strategy is named {output!r}. "
                f"Known: {', '.join(outputs)} (`ollm plugins` shows the plugins they come "
                "from)."
            )
            return False
    name = config.tool_strategy
    known = strategy_names(registries)
    if name in known:
        return True
    given = args.tool_strategy or args.react
    asked = f"--tool-strategy {name}" if given else f"OLLM_TOOL_STRATEGY={name}"
    hint = INSTALL_HINTS.get(name)
    install = f" Install it with: {hint}." if hint else ""
    terminal.error(
        f"{asked}: no tool strategy is named {name!r}.{install} Known: {', '.join(known)} "
        "(`ollm plugins` shows the plugins they come from)."
    )
    return False


def _redacted_system(
    system: str | None, middleware: Sequence[str], registries: Registries
) -> str | None:
    """The system prompt as the log keeps it: through the chat's ``redact``, as every
    request sends it and the history keeps the messages."""
    if not system or "redact" not in middleware:
        return system
    from ollm.middleware.redact import Redact

    redact = registries.middleware.create("redact")
    return redact.text(system) if isinstance(redact, Redact) else system


def _approval(
    args: argparse.Namespace, toolsets: Sequence[object], terminal: Terminal, asking: TextIO | None
) -> tuple[ApprovalPolicy | None, Approver | None, TerminalQuestions | None]:
    """The chat's approval rules, and who answers its questions: the person at the
    terminal, else no one (the call is refused). Only where tools are offered: a plain
    chat reads no policy file and imports none of it."""
    if not (args.tools or toolsets):
        if args.policy or os.environ.get("OLLM_POLICY", "").strip():
            # A policy the user named is read all the same: a typo is said now, not
            # found the day a tool is offered.
            from ollm.cli.approval import user_policy

            user_policy(args)
        return None, None, None
    from ollm.cli.approval import TerminalQuestions, no_terminal, policy_from

    policy = policy_from(args)
    if asking is None:
        return policy, no_terminal(policy), None
    return policy, None, TerminalQuestions(terminal, asking)


class _Session:
    """What one ``ollm chat`` works with: the client, its output and its log."""

    def __init__(
        self,
        client: ChatClient,
        registries: Registries,
        config: CliConfig,
        renderer: EventRenderer,
        terminal: Terminal,
        log: ChatLog,
        system: str | None,
    ) -> None:
        self.client = client
        self.config = config
        self.renderer = renderer
        self.terminal = terminal
        self.log = log
        self.system = system
        self.provider = registries.providers.get(config.provider)
        self.model = config.model or getattr(self.provider, "default_model", None)
        self.questions: TerminalQuestions | None = None
        self.output_schema: dict[str, Any] | None = None

    def exchange(self, stream: ChatStream, portal: BlockingPortal) -> FinishEvent | None:
        """One chat, drawn as it comes, then logged (even when Ctrl-C ends it)."""
        started = time.perf_counter()
        self.renderer.error = None
        self.renderer.finish = None
        self.renderer.output = None
        decisions: list[ToolDecisionEvent] = []
        compactions: list[CompactionEvent] = []

        def on_event(event: ChatEvent) -> None:
            self.renderer(event)
            if type(event) is ToolDecisionEvent:
                decisions.append(event)
            elif type(event) is CompactionEvent:
                compactions.append(event)
            elif type(event) is ApprovalRequestEvent and self.questions is not None:
                # The reply is in the history: logged before asking, so that a session
                # stopped while asking can go on with it (ollm chat --cid).
                self.log.checkpoint(
                    stream.conversation,
                    provider=self.provider.name,
                    model=self.model,
                    system=self.system,
                )
                self.questions(event, stream)

        try:
            return _stream(stream, portal, on_event, self.renderer, self.terminal)
        finally:
            kept = self.log.record(
                stream.conversation,
                provider=self.provider.name,
                model=self.model,
                system=self.system,
                finish=self.renderer.finish,
                error=self.renderer.error,
                duration_ms=(time.perf_counter() - started) * 1000.0,
                decisions=decisions,
                output_schema=self.output_schema,
                output=self.renderer.output,
                compactions=compactions,
            )
            if kept < len(stream.conversation):  # no model answered: the prompt leaves
                self.client.conversation = Conversation(
                    stream.conversation.messages[:kept], id=stream.conversation.id
                )


def _local_command(text: str, session: _Session) -> bool:
    """Run ``text`` if it is an interactive command (one /word); say whether it was."""
    if not _COMMAND.fullmatch(text):
        return False
    terminal = session.terminal
    if text == "/clear":
        session.client.new_conversation()
        session.log.new_conversation()
        terminal.info("(a new conversation)", "dim")
        return True
    if text == "/compact":
        session.client.compact_next()
        terminal.info("(the next request leaves about half of the conversation out)", "dim")
        return True
    if text != "/help":
        terminal.info(f"{text} is not a command here.", "dim")
    terminal.info(_HELP, "dim")
    return True


def _read_prompt(prompt: str | None, stdin: TextIO, terminal: Terminal) -> str | None:
    """PROMPT, '-' for stdin, or piped text (put before PROMPT when both are given).

    A blank PROMPT with text piped in is that text; a blank one alone stays blank (the
    caller refuses it: it never starts an interactive session).
    """
    if prompt == "-":
        return _read_all(stdin, terminal)
    piped = None if _isatty(stdin) else _read_all(stdin, terminal)
    if piped is not None and not piped.strip():
        piped = None
    if prompt is not None and prompt.strip() and piped:
        return f"{piped.rstrip()}\n\n{prompt}"
    return piped or prompt


def _read_all(stdin: TextIO, terminal: Terminal) -> str:
    """All of standard input as text: a byte its encoding cannot read becomes U+FFFD."""
    _keep_undecodable_bytes(stdin)
    return terminal.decoded(stdin.read(), "standard input", getattr(stdin, "encoding", None))


def _keep_undecodable_bytes(stdin: TextIO) -> None:
    """Read bytes that are not text as lone surrogates (``Terminal.decoded`` replaces them),
    never as a UnicodeDecodeError, whatever the locale made the stream's error handler."""
    reconfigure = getattr(stdin, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="surrogateescape")


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
        names: list[str] | None
        try:
            names = [m.name for m in portal.call(provider.list_models)]
        except OllmError:
            raise  # the server is down or failing: that is the first thing to fix
        except Exception:
            names = None  # nothing known, so nothing said
        if names:
            hint = f" Your models: {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}."
        elif names is not None:
            from ollm.cli.models import no_models_hint

            hint = f" You have none yet. {no_models_hint(provider)}"
    raise InvalidRequestError(
        f"no model chosen. Pass -m MODEL, or set OLLM_MODEL.{hint}", provider=provider.name
    )


def _stream(
    stream: ChatStream,
    portal: BlockingPortal,
    on_event: Callable[[ChatEvent], None],
    renderer: EventRenderer,
    terminal: Terminal,
) -> FinishEvent | None:
    """Draw a chat's events as they come; Ctrl-C once aborts it, twice gives up."""

    def interrupted() -> None:
        stream.abort("interrupted")
        if not renderer.json:
            terminal.info("stopping... (Ctrl-C again to quit)", "dim")

    renderer.finish = None
    drive(portal, stream.__aiter__(), on_event, interrupted)
    return renderer.finish


def _exit_code(finish: FinishEvent | None) -> int:
    if finish is None:
        return EXIT_ERROR
    if finish.reason == "cancelled":
        return EXIT_INTERRUPTED
    if finish.reason in ("error", "token_limit"):
        return EXIT_ERROR
    return EXIT_OK


def _interactive(session: _Session, portal: BlockingPortal) -> int:
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401 - line editing and history for input()
    client, terminal = session.client, session.terminal
    _keep_undecodable_bytes(sys.stdin)  # input() decodes with sys.stdin's settings
    resumed = len(client.conversation.messages)
    going_on = (
        f" Going on with conversation {session.log.cid} ({resumed} messages)." if (resumed) else ""
    )
    terminal.info(
        f"Chatting with {session.model or ''} via {session.provider.name}.{going_on} /help lists "
        "the commands; /exit, Ctrl-D or Ctrl-C twice leaves.",
        "dim",
    )
    interrupted = False
    while True:
        try:
            line = input(terminal.style("> ", "bold", stream="out") if terminal.out_color else "> ")
            text = terminal.decoded(line, "your input", sys.stdin.encoding).strip()
            if text:
                interrupted = False
            if text in ("/exit", "/quit", "/bye"):
                return EXIT_OK
            if not text or _local_command(text, session):
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
        finish = session.exchange(client.chat(text), portal)
        terminal.end_line()
        if finish is not None and finish.reason == "cancelled":
            continue


def _tool_selection(args: argparse.Namespace) -> list[object]:
    """``--tools-max N`` (and ``--tools-embed MODEL``): the ``select-tools`` middleware,
    innermost."""
    if args.tools_max is None and args.tools_embed is None:
        return []
    from ollm.middleware.tool_selection import ToolSelection

    return [ToolSelection(args.tools_max or 16, embed_model=args.tools_embed or None)]
