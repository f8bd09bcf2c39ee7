"""The command line's grammar. Imports nothing but argparse, so ``--help`` is instant."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TypeAlias

__all__ = ["build_parser", "check_leftovers"]

_EPILOG = """\
examples:
  ollm chat -m llama3.2 "Why is the sky blue?"
  ollm chat -m qwen3 -t calculate -t current_time "What is 17% of 2,340? And the time?"
  cat notes.txt | ollm chat -m llama3.2 "Summarise this"
  ollm chat -p echo "hello"                 (no server needed: the echo provider)
  ollm chat -m qwen3 --mcp servers.json -t 'git_*' "What changed?"   (MCP servers' tools)
  ollm chat -c "And in Tokyo?"             (go on with the last conversation)
  ollm chat -m qwen3 --mcp servers.json -t 'fs_*' --ask 'fs_write' "Tidy up"   (asks first)
  ollm logs -q paris                        (search the logged conversations)
  ollm models pull llama3.2
  ollm plugins

environment:
  OLLM_PROVIDER, OLLM_MODEL     defaults for -p and -m
  OLLAMA_HOST                   where Ollama listens (default http://127.0.0.1:11434)
  OLLM_MCP_CONFIG               an mcpServers file used when --mcp is not given
  OLLM_MIDDLEWARE               middleware for every chat (a,b), when --middleware is not given
  OLLM_TOOL_STRATEGY            how models call tools, when --tool-strategy is not given
  OTEL_EXPORTER_OTLP_ENDPOINT   where --trace sends traces (setting it turns tracing on)
  OLLM_POLICY                   the approval policy file (default ~/.config/ollm/policy.toml)
  OLLM_LOGS_PATH, OLLM_LOGS=off where conversations are logged (`ollm logs path`), or not
  OLLM_BACKEND                  asyncio (default) or trio
  NO_COLOR                      plain output
"""


# The sub-commands of ``ollm`` (argparse has no public name for it).
_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _translate_once() -> None:
    """Look argparse's translations up once, not for every help string.

    argparse calls ``gettext.gettext`` for each message it builds, and each call searches
    the locale folders again (tens of file checks per argument). The translation found
    is the same every time in one process, so it is found once and reused: the same
    words, a few milliseconds less at every start.
    """
    import gettext

    domain = gettext.textdomain()
    found = gettext.translation(domain, fallback=True)
    argparse._ = found.gettext  # type: ignore[attr-defined]
    argparse.ngettext = found.ngettext  # type: ignore[attr-defined]


def build_parser(words: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``ollm`` and its commands; with ``words`` (the command line), the
    plugins' commands too when it may name one (see ``ollm.cli.plugin_commands``)."""
    _translate_once()
    parser = argparse.ArgumentParser(
        prog="ollm",
        description="Chat with language models on your own machine, with tools and plugins.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks and debug logs on errors"
    )
    parser.add_argument(
        "--backend",
        choices=("asyncio", "trio"),
        default=None,
        help="the async backend (default: $OLLM_BACKEND or asyncio)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    for add in (_chat_command, _models_command, _logs_command, _listing_commands):
        add(commands)
    if words is not None:
        from ollm.cli.plugin_commands import add_plugin_commands

        add_plugin_commands(commands, words)
    return parser


def _chat_command(commands: _Commands) -> None:
    """``ollm chat``: its options in the order ``--help`` lists them."""
    chat = commands.add_parser(
        "chat",
        help="chat with a model (interactive when no prompt is given at a terminal)",
        description="Stream a model's reply. With no PROMPT at a terminal, start an "
        "interactive session that keeps the history (/exit to leave). PROMPT '-', or "
        "text piped in, is read from standard input.",
    )
    for options in (
        _chat_basics,
        _chat_middleware,
        _chat_approval,
        _chat_limits,
        _chat_output,
        _chat_ways,
    ):
        options(chat)
    chat.set_defaults(_parser=chat)


def _chat_basics(chat: argparse.ArgumentParser) -> None:
    """What to send, to which model, with which tools."""
    chat.add_argument(
        "prompt",
        nargs="?",
        help="the message (not empty); '-' reads standard input",
    )
    chat.add_argument("-m", "--model", help="the model (default: $OLLM_MODEL)")
    chat.add_argument(
        "-p",
        "--provider",
        help=(
            "the provider (default: $OLLM_PROVIDER, else Ollama when it answers, "
            "else the built-in model)"
        ),
    )
    chat.add_argument("-s", "--system", help="a system prompt")
    chat.add_argument(
        "-t",
        "--tool",
        dest="tools",
        action="append",
        default=[],
        metavar="NAME",
        help="offer a tool, by name or glob such as 'git_*' (repeat for more; "
        "`ollm tools` lists them)",
    )
    _toolset_options(chat)


def _chat_middleware(chat: argparse.ArgumentParser) -> None:
    """The middleware around requests and tool calls."""
    chat.add_argument(
        "--middleware",
        action="extend",
        type=_comma_list,
        default=[],
        metavar="NAME",
        help="run an installed middleware around requests and tool calls (a,b or repeat "
        "the flag for more, the first outermost; `ollm plugins` lists them; default: "
        "$OLLM_MIDDLEWARE=a,b)",
    )
    chat.add_argument(
        "--middleware-timeout",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="how long a middleware may take each time it is called (default 5)",
    )
    chat.add_argument(
        "--trace",
        action="store_true",
        help="send the chat's OpenTelemetry traces and metrics where the OTEL_* variables "
        "say (the otel middleware of ollm-otel; on by itself when "
        "OTEL_EXPORTER_OTLP_ENDPOINT is set)",
    )


def _chat_approval(chat: argparse.ArgumentParser) -> None:
    """Which tool calls run, wait for an answer, or are refused."""
    approval = chat.add_argument_group(
        "approval of tool calls",
        "Each tool call runs, waits for your answer, or is refused, by these rules and "
        "those of the policy file (--policy, $OLLM_POLICY, else ~/.config/ollm/policy.toml): "
        "deny wins over ask, ask over allow. A tool may ask by itself (an MCP server's "
        "destructive tools do). Without a terminal, a call that needs an answer is refused.",
    )
    approval.add_argument(
        "--approve",
        action="store_true",
        help="ask before each tool call no rule allows (the policy's default becomes ask; "
        "--allow still allows, a deny still denies)",
    )
    approval.add_argument(
        "--policy",
        default=None,
        metavar="PATH",
        help="the approval policy file (default: $OLLM_POLICY, else "
        "~/.config/ollm/policy.toml); one that cannot be read stops the chat",
    )
    for verb, what in (
        ("allow", "run the calls of these tools without asking"),
        ("ask", "ask before the calls of these tools run"),
        ("deny", "never run the calls of these tools"),
    ):
        approval.add_argument(
            f"--{verb}",
            action="extend",
            type=_comma_list,
            default=[],
            metavar="GLOB",
            help=f"{what} (a name or a glob such as 'fs_*'; a,b or repeat the flag for more)",
        )


def _chat_limits(chat: argparse.ArgumentParser) -> None:
    """Turns, sampling, the context window and what fits in it."""
    chat.add_argument("--max-turns", type=_positive_int, default=None, help="requests per chat")
    chat.add_argument(
        "--temperature", type=_temperature, default=None, help="sampling temperature, 0 to 2"
    )
    chat.add_argument("--max-tokens", type=_positive_int, default=None, help="reply length limit")
    chat.add_argument("--seed", type=int, default=None, help="sampling seed")
    chat.add_argument(
        "--context-window",
        type=_window,
        default=None,
        help="context size in tokens, or auto: grown as the conversation grows (Ollama's "
        "num_ctx, in powers of two from 4096 up to the model's longest)",
    )
    chat.add_argument(
        "--tools-max",
        type=_positive_int,
        default=None,
        metavar="N",
        help="send at most N tools a request: those already called, then the most relevant "
        "to the conversation (for toolsets with many tools)",
    )
    chat.add_argument(
        "--tools-embed",
        default=None,
        metavar="MODEL",
        help="with --tools-max (16 if not given): rank the tools by similarity of MODEL's "
        "embeddings (for example nomic-embed-text) instead of shared words; falls back to "
        "shared words, with a warning, where the provider cannot embed",
    )
    chat.add_argument(
        "--compact",
        type=_compact,
        default="auto",
        metavar="STRATEGY",
        help="what requests leave out of a long conversation to fit the window (the log "
        "keeps everything): auto (old tool results, then the oldest turns; the default), "
        "clear-results, trim, summarize[:MODEL] (the oldest turns, summarized by the model "
        "in one request), off, or the name of a plugin's compactor (`ollm plugins` lists "
        "them)",
    )
    chat.add_argument(
        "--on-truncation",
        choices=("notice", "error"),
        default="notice",
        help="when the server cut the prompt to fit its window (Ollama): say so and go on "
        "(notice, the default), or stop the chat with CONTEXT_EXCEEDED (error)",
    )


def _chat_output(chat: argparse.ArgumentParser) -> None:
    """How the reply is printed, and typed output."""
    chat.add_argument("--json", action="store_true", help="print every event as a JSON line")
    chat.add_argument(
        "--call-deltas",
        action="store_true",
        help="show each tool call as the model writes it (from servers that stream them: "
        "OpenAI-compatible ones); with --json, as tool_call_delta events",
    )
    chat.add_argument(
        "--schema",
        metavar="SCHEMA",
        help="answer with JSON of this schema, printed alone on one line: fields such as "
        "'name, age int, tags list[str]', or a JSON Schema (a file, or inline)",
    )
    chat.add_argument(
        "--schema-multi",
        action="store_true",
        help='with --schema: a list of such objects, as {"items": [...]}',
    )
    chat.add_argument(
        "--output-retries",
        type=_non_negative_int,
        default=None,
        metavar="N",
        help="with --schema: corrections an answer that does not match gets (default 2)",
    )
    chat.add_argument(
        "--output-strategy",
        metavar="NAME",
        default=None,
        help="with --schema: how the value is asked for: auto (the server's JSON constraint; "
        "the default), native, tool (the value as the arguments of a forced tool call, for "
        "models whose tool calling is stronger than their JSON mode), prompted, or another "
        "installed one (`ollm plugins` lists them)",
    )


def _chat_ways(chat: argparse.ArgumentParser) -> None:
    """How tools are called, which conversation goes on, what is shown."""
    strategy = chat.add_mutually_exclusive_group()
    strategy.add_argument(
        "--tool-strategy",
        metavar="NAME",
        default=None,
        help="how the model calls tools: auto (native when the model can, else ReAct; the "
        "default), native, or an installed strategy such as react or react-example "
        "(`ollm plugins` lists them; default: $OLLM_TOOL_STRATEGY)",
    )
    strategy.add_argument(
        "--react", action="store_true", help="call tools through ReAct (--tool-strategy react)"
    )
    chat.add_argument(
        "-c",
        "--continue",
        dest="resume",
        action="store_true",
        help="go on with the most recent logged conversation",
    )
    chat.add_argument("--cid", metavar="ID", help="go on with the logged conversation ID")
    chat.add_argument(
        "--no-log", action="store_true", help="do not log this conversation ($OLLM_LOGS=off)"
    )
    chat.add_argument(
        "--no-recover",
        action="store_true",
        help="never run a tool call the model wrote as text (with native tools)",
    )
    chat.add_argument(
        "--hide-thinking", action="store_true", help="do not show the model's reasoning"
    )
    chat.add_argument(
        "--think",
        choices=("on", "off", "low", "medium", "high"),
        default=None,
        help="ask a thinking model to reason, or not",
    )


def _models_command(commands: _Commands) -> None:
    """``ollm models`` and its actions."""
    models = commands.add_parser("models", help="list, show, pull, remove or inspect models")
    models.add_argument("-p", "--provider", help="the provider (default: $OLLM_PROVIDER or ollama)")
    models.add_argument("--json", action="store_true", help="machine-readable output")
    actions = models.add_subparsers(dest="action", metavar="ACTION")
    listing = actions.add_parser("list", help="the models you have")
    show = actions.add_parser("show", help="one model in detail")
    show.add_argument("name")
    pull = actions.add_parser("pull", help="download a model, with a progress bar")
    pull.add_argument("name")
    remove = actions.add_parser("rm", help="delete a model")
    remove.add_argument("name")
    loaded = actions.add_parser("ps", help="the models loaded in memory")
    for action in (listing, show, pull, remove, loaded):
        # `ollm models list -p X --json` as well as `ollm models -p X --json list`.
        action.add_argument(
            "-p",
            "--provider",
            default=argparse.SUPPRESS,
            help="the provider (default: $OLLM_PROVIDER or ollama)",
        )
        action.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
        )
    for command in (models, *actions.choices.values()):
        command.set_defaults(_parser=command)


def _logs_command(commands: _Commands) -> None:
    """``ollm logs`` and its actions."""
    logs = commands.add_parser(
        "logs",
        help="the logged conversations: list, search, show, remove",
        description="Every `ollm chat` is logged (unless --no-log or OLLM_LOGS=off). "
        "With no ACTION, list the latest conversations.",
    )
    log_actions = logs.add_subparsers(dest="action", metavar="ACTION")
    log_list = log_actions.add_parser("list", help="the latest conversations (the default)")
    log_show = log_actions.add_parser("show", help="one conversation, as Markdown or JSON")
    log_show.add_argument("id", help="the conversation's id (or the start of it)")
    log_remove = log_actions.add_parser("rm", help="delete a conversation")
    log_remove.add_argument("id", help="the conversation's id (or the start of it)")
    log_actions.add_parser("path", help="where the database is")
    for command in (logs, log_list):
        command.add_argument(
            "-n", type=_positive_int, default=argparse.SUPPRESS, help="how many (default 10)"
        )
        command.add_argument("-m", "--model", default=argparse.SUPPRESS, help="only this model")
        command.add_argument(
            "-q", "--query", default=argparse.SUPPRESS, help="only those whose text has these words"
        )
        command.add_argument(
            "--data",
            action="store_true",
            default=argparse.SUPPRESS,
            help="the values of their typed output (chat --schema), one JSON line each, "
            "oldest first",
        )
    for command in (logs, log_list, log_show):
        command.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
        )
    for command in (logs, *log_actions.choices.values()):
        command.set_defaults(_parser=command)


def _listing_commands(commands: _Commands) -> None:
    """``ollm plugins`` and ``ollm tools``."""
    plugins = commands.add_parser("plugins", help="every plugin: where from, what state")
    plugins.add_argument("--json", action="store_true", help="machine-readable output")
    tools = commands.add_parser("tools", help="the tools of every tool pack, with schemas")
    tools.add_argument("--json", action="store_true", help="machine-readable output")
    _toolset_options(tools)
    for command in (plugins, tools):
        command.set_defaults(_parser=command)


def check_leftovers(
    parser: argparse.ArgumentParser, args: argparse.Namespace, leftovers: Sequence[str]
) -> None:
    """Refuse the arguments no parser took, with the usage of the command they were given
    to (``ollm chat --modle x`` shows ``ollm chat``'s, not ``ollm``'s)."""
    if leftovers:
        command: argparse.ArgumentParser = getattr(args, "_parser", None) or parser
        command.error(f"unrecognized arguments: {' '.join(leftovers)}")


def _toolset_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="FILE",
        help="the tools of the MCP servers in FILE, an mcpServers JSON file (needs ollm-mcp); "
        "in chat, pick them with -t 'SERVER_*'",
    )
    command.add_argument(
        "--toolset",
        action="append",
        default=[],
        metavar="KIND=CONFIG",
        help="the toolsets a plugin builds from CONFIG (--mcp FILE is --toolset mcp=FILE); "
        "else $OLLM_<KIND>_CONFIG",
    )


def _comma_list(text: str) -> list[str]:
    """``a,b``: the names (or globs) of one flag, as ``$OLLM_MIDDLEWARE`` takes them.

    A comma inside ``[...]`` or ``{...}`` is refused, not split: a glob has no ``{a,b}``
    alternatives, and cutting ``fs_{write,delete}`` in two would leave two globs that
    match nothing, a ``--deny`` that denies nothing.
    """
    depth = 0
    for char in text:
        if char in "[{":
            depth += 1
        elif char in "]}" and depth:
            depth -= 1
        elif char == "," and depth:
            raise argparse.ArgumentTypeError(
                f"{text!r} has a comma inside [...] or {{...}}: globs have no {{a,b}} "
                "alternatives, and a comma here separates names. Repeat the flag, one "
                "name or glob each time"
            )
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(
            f"{text!r} has an empty name: give names separated by commas (a,b), or repeat the flag"
        )
    return names


def _temperature(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 2.0:
        raise argparse.ArgumentTypeError(f"{text} is outside 0 to 2 (0 is the most predictable)")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a number above 0")
    return value


def _compact(text: str) -> str:
    from ollm.runtime.settings import check_compact  # not compaction: a chat may not compact

    try:
        return check_compact(text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _window(text: str) -> int | str:
    return "auto" if text.strip().lower() == "auto" else _positive_int(text)


def _positive_int(text: str) -> int:
    return _whole_number(text, 1)


def _non_negative_int(text: str) -> int:
    return _whole_number(text, 0)


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"{text} must be {least} or more")
    return value
