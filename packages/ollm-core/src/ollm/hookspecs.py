"""The hooks a plugin implements. Each docstring is the plugin author's documentation.

A plugin is a module (or any object) with functions marked ``@ollm.hookimpl`` whose
names are the hooks below. Point an entry point of the group ``ollm.plugins`` at it::

    # pyproject.toml of your distribution
    [project.entry-points."ollm.plugins"]
    weather = "ollm_weather.plugin"

The entry point's name (``weather``) is the plugin's short name. Keep the module small:
discovery imports it at start-up, so import heavy modules (HTTP clients, SDKs) inside
factories and tool functions, never at its top. Every hook takes no arguments and
returns a list of what the plugin contributes; a hook that raises, or returns something
else, is reported by ``ollm plugins`` and that plugin is skipped as a whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pluggy

from ollm.types.compactor import CompactorSpec
from ollm.types.output import OutputStrategySpec
from ollm.types.provider import ProviderAdapter
from ollm.types.specs import (
    CommandSpec,
    MiddlewareSpec,
    ProviderSpec,
    StrategySpec,
    TokenCounterSpec,
    ToolsetSpec,
)

__all__ = [
    "PROJECT",
    "hookimpl",
    "hookspec",
    "ollm_commands",
    "ollm_compactors",
    "ollm_middleware",
    "ollm_output_strategies",
    "ollm_providers",
    "ollm_token_counters",
    "ollm_tool_strategies",
    "ollm_tools",
    "ollm_toolsets",
]

PROJECT = "ollm"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def ollm_providers() -> Sequence[ProviderSpec | ProviderAdapter]:  # type: ignore[empty-body]
    """Contribute providers.

    Return ``ProviderSpec(name, factory, description, default)`` objects: the factory
    runs the first time the provider is used, so discovery never builds an HTTP client
    or touches the network. ``default=True`` asks to be the default provider when the
    user has not chosen one (the Ollama provider does). A ready provider object is
    accepted too. When plugins offer the same name, ollm's own keep theirs, then the first
    by entry-point name, unless ``OLLM_PROVIDER_<NAME>=<plugin>`` chooses; only the
    clashing item is skipped (see ``ollm.plugins.loader``).

    Example::

        @ollm.hookimpl
        def ollm_providers():
            def build():
                from my_plugin.provider import MyProvider  # heavy imports here
                return MyProvider()
            return [ollm.ProviderSpec("mine", build, "My backend")]
    """


@hookspec
def ollm_tools() -> Sequence[Any | Callable[..., Any]]:  # type: ignore[empty-body]
    """Contribute a tool pack.

    Return ``ollm.Tool`` objects or plain functions (sync or async) with type-annotated
    parameters; a function is made a tool as ``@ollm.tool`` would. Tools are offered to
    a model only when a chat enables them by name (``ollm chat -t NAME``).

    Example::

        @ollm.hookimpl
        def ollm_tools():
            return [get_weather, convert_currency]
    """


@hookspec
def ollm_token_counters() -> Sequence[TokenCounterSpec]:  # type: ignore[empty-body]
    """Contribute token counters for models whose provider cannot count tokens itself.

    Return ``TokenCounterSpec(pattern, counter)``: ``pattern`` is a model name or a glob
    (``"llama3*"``), and ``counter(request)`` returns the prompt tokens of a
    ``ProviderRequest`` as a positive integer. The runtime asks the provider first, then
    the counter for the model, then estimates characters / 4.
    """


@hookspec
def ollm_tool_strategies() -> Sequence[StrategySpec]:  # type: ignore[empty-body]
    """Contribute a tool-calling strategy (as ``ollm-react`` contributes ``react``).

    Return ``StrategySpec(name, factory, description)``; ``factory()`` builds one
    ``ollm.ToolStrategy`` per chat. The runtime uses a strategy when a chat asks for it
    by name, and ``react`` also when a model cannot take tools natively.
    """


@hookspec
def ollm_output_strategies() -> Sequence[OutputStrategySpec]:  # type: ignore[empty-body]
    """Contribute an output strategy: a way of asking a model for typed output (the
    twin of ``ollm_tool_strategies``; ``ollm-react`` contributes ``prompted``).

    Return ``OutputStrategySpec(name, factory, description)``; ``factory()`` builds one
    ``ollm.OutputStrategy`` per chat: ``prepare(request, schema)`` returns the request
    asking for a JSON value of ``schema`` (a grammar for a local model, say, or the
    schema in words), ``extract(text)`` the JSON text in the reply, and ``constrains``
    says whether the server is expected to enforce the schema. The runtime validates
    what ``extract`` returns with msgspec, always, and sends corrections itself. It
    uses ``native`` unless a chat names another (``output_strategy=``, ``tool`` among
    the built-in ones), and ``prompted`` for a model that ignored the native constraint
    and with ReAct. ``stream``, ``uses_tools`` and ``answer_again`` are
    optional (``ollm.OutputStrategy``'s module says what they do).
    """


@hookspec
def ollm_compactors() -> Sequence[CompactorSpec]:  # type: ignore[empty-body]
    """Contribute a compactor: what a request leaves out of a long conversation to fit
    the context window (ollm's own are ``clear-results``, ``trim``, ``summarize`` and
    ``auto``; the twin of ``ollm_tool_strategies``).

    Return ``CompactorSpec(name, factory, description)``; ``factory()`` builds one
    ``ollm.Compactor`` per chat, used only when the chat names it (``compact="NAME"``,
    ``ollm chat --compact NAME``). Before a request whose estimate passes
    ``compact_at`` of the window, the runtime calls ``compact(messages, fixed_tokens=,
    target=, count=)`` with the whole conversation and sends what it returns (whole
    units only: a call goes with its results). The conversation and the log keep every
    message; each compaction is a ``CompactionEvent``.

    Example::

        @ollm.hookimpl
        def ollm_compactors():
            return [ollm.CompactorSpec("keep-last", KeepLast, "Send the last 8 messages")]
    """


@hookspec
def ollm_toolsets() -> Sequence[ToolsetSpec]:  # type: ignore[empty-body]
    """Contribute a kind of toolset: tools that take configuration and hold state.

    Where ``ollm_tools()`` hands over functions once, a toolset is opened when a chat
    (or a ``ChatClient``) starts using it and closed when that ends: a server is
    started, a connection made. Return ``ToolsetSpec(name, factory, description)``;
    ``factory(config)`` gets the configuration as text (its meaning is yours: a file
    path, JSON...) and returns ``ollm.Toolset`` objects, each with a ``name`` that
    prefixes its tools (``git`` gives ``git_status``) and an ``open()`` async context
    manager that starts it and yields its ``ollm.Tool`` objects (see ``ollm.Toolset``).
    The factory runs only when asked for, never at discovery.

    On the command line, ``ollm chat --toolset NAME=CONFIG`` (or the environment
    variable ``OLLM_<NAME>_CONFIG``) builds the toolsets of kind ``NAME``, and ``-t``
    picks their tools by name or glob: ``ollm chat --toolset mcp=servers.json -t
    'git_*'`` (``--mcp FILE`` is short for ``--toolset mcp=FILE``). In Python, pass
    toolsets to ``ChatClient(tools=[...])`` to offer all their tools, or to
    ``ChatClient(toolsets=[...])`` to let ``tools`` pick among them by name or glob.

    Example::

        @ollm.hookimpl
        def ollm_toolsets():
            def build(config: str):
                from my_plugin.toolset import NotesToolset  # heavy imports here
                return [NotesToolset(name="notes", database=config)]
            return [ollm.ToolsetSpec("notes", build, "Search my notes database")]
    """


@hookspec
def ollm_middleware() -> Sequence[MiddlewareSpec]:  # type: ignore[empty-body]
    """Contribute middleware: code around each request and each tool call of a chat.

    Return ``MiddlewareSpec(name, factory, description)``. A middleware runs only in
    the chats that name it (``ollm chat --middleware NAME``, ``OLLM_MIDDLEWARE=a,b``,
    ``ChatClient(middleware=["NAME"])`` or ``chat(..., middleware=[...])``): installing
    a plugin lists its middleware in ``ollm plugins`` and runs nothing, so no plugin
    reads prompts by being installed. ``factory()`` builds the object the first time a
    client names it (one per client).

    The object has any of these methods, ``async`` or plain (a plain one runs in a
    worker thread), each given the chat's ``ollm.MiddlewareContext`` first:

    - ``on_request(ctx, request)``: returns the ``ProviderRequest`` to send;
    - ``on_event(ctx, event)``: returns the event to pass on, ``None`` to drop it, or a
      list of events; the ``FinishEvent`` passes too (it cannot be dropped or moved:
      events returned with it go before it);
    - ``before_tool_call(ctx, call)``: returns the ``ToolCall`` to run (its arguments
      may change; the history keeps the model's as ``original_args``), ``ollm.Deny(
      message)`` (the call does not run; the message is its result) or
      ``ollm.Ask(reason)`` (a person approves it first);
    - ``after_tool_call(ctx, call, result)``: returns the ``ToolResult`` the model reads;
    - ``on_message(ctx, message)``: returns the ``Message`` the history keeps;
    - ``on_finish(ctx, finish)``: the chat's end, once.

    Several middlewares nest in the order they are named, the first outermost: requests
    and ``before_tool_call`` go from the first to the last, events, messages,
    ``after_tool_call`` and ``on_finish`` from the last to the first. A method that
    raises, or takes longer than the chat's ``middleware_timeout`` (5 s by default), ends
    the chat with one ``MIDDLEWARE_FAILED`` error naming it; the history stays intact.

    Example::

        @ollm.hookimpl
        def ollm_middleware():
            def build():
                from my_plugin.shout import Shout  # heavy imports here
                return Shout()
            return [ollm.MiddlewareSpec("shout", build, "Upper-case every reply")]
    """


@hookspec
def ollm_commands() -> Sequence[CommandSpec]:  # type: ignore[empty-body]
    """Contribute sub-commands of ``ollm`` (as ``ollm-serve`` contributes ``ollm serve``;
    llm's ``register_commands`` is the model).

    Return ``CommandSpec(name, help, configure, run, description)``: ``help`` is the line
    ``ollm --help`` shows, ``configure(parser)`` adds the command's arguments to its
    ``argparse.ArgumentParser``, and ``run(args)`` runs it with the parsed
    ``argparse.Namespace`` and returns its exit code (``None`` for 0). ``run`` may be a
    coroutine function: it then runs on the async backend chosen by ``ollm --backend``
    (asyncio or trio). An ``ollm.OllmError`` it raises is shown as ollm's errors are
    (its message and code, exit code 1), Ctrl-C gives exit code 130.

    A command costs nothing until it runs: ``ollm chat`` and the other built-in commands
    never discover plugins' commands, and ``configure`` and ``run`` are called only for
    ``ollm NAME``, so import your heavy modules inside them, never at the top of the
    plugin module. ``ollm --help`` lists every plugin command with its help line. A name
    taken by ollm's own commands (``chat``, ``models``, ``logs``, ``plugins``, ``tools``)
    or by an earlier plugin is skipped, and ``ollm plugins`` says so.

    Example::

        def configure(parser):
            parser.add_argument("--port", type=int, default=8000)

        async def run(args):
            from my_plugin.server import serve  # heavy imports here
            await serve(port=args.port)
            return 0

        @ollm.hookimpl
        def ollm_commands():
            return [ollm.CommandSpec("web", "serve a web page", configure, run)]
    """
