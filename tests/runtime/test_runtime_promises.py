"""Promises of the runtime that the whole-suite mutation run of ``ollm.runtime`` found
unchecked (tests/MUTATION.md): which of two tools with one name is offered, images for a
provider that cannot say what its model sees, the advice on a refusal of tools, and
where arguments that cannot be used are cut short in the words the model reads."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, client, collect

import ollm
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

PIXEL = ollm.ImagePart(b"\x89PNG\r\n\x1a\nfake", "image/png")


@ollm.tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"first: {query}"


def _other_lookup(query: str) -> str:
    """Look something up elsewhere."""
    return f"second: {query}"


@ollm.tool
def picture() -> ollm.ToolResult:
    """Show a picture."""
    return ollm.ToolResult("a picture", images=(PIXEL,))


async def test_of_two_tools_with_one_name_the_first_is_offered_and_the_clash_is_logged(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    second = ollm.Tool.from_function(_other_lookup).renamed("lookup", pack="extras")
    call = ollm.ToolCall("a", "lookup", {"query": "x"})
    provider = ScriptedProvider(Reply(tool_calls=[call]), "done")
    with caplog.at_level(logging.WARNING, logger="ollm.runtime.toolsets"):
        # The same tool twice is one tool, not a clash.
        events = await collect(client(provider, tools=[lookup, second, lookup]).chat("go"))
    assert [tool.name for tool in provider.requests[0].tools] == ["lookup"]
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert result.result == "first: x"
    assert [r.getMessage() for r in caplog.records] == [
        "two tools are named 'lookup' (from the application and extras): the first is offered"
    ]

    caplog.clear()
    provider = ScriptedProvider(Reply(tool_calls=[call]), "done")
    with caplog.at_level(logging.WARNING, logger="ollm.runtime.toolsets"):
        events = await collect(client(provider, tools=[second, lookup]).chat("go"))
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert result.result == "second: x"
    assert [r.getMessage() for r in caplog.records] == [
        "two tools are named 'lookup' (from extras and the application): the first is offered"
    ]


class _Bare:
    """A provider that only streams: it cannot say what a model sees."""

    name = "bare"
    default_model = "bare-model"
    handles_abort = True

    def __init__(self, *replies: Reply | str) -> None:
        self.inner = ScriptedProvider(*replies)

    def chat_stream(self, request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        return self.inner.chat_stream(request)


async def test_a_tools_images_reach_a_provider_that_cannot_say_what_its_model_sees(
    anyio_backend: str,
) -> None:
    provider = _Bare(Reply(tool_calls=[ollm.ToolCall("a", "picture", {})]), "a red dot")
    chat_client = client(provider, tools=[picture])  # type: ignore[arg-type]
    events = await collect(chat_client.chat("go"))
    assert_one_finish_last(events, "stop")
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    # A ToolResult that is not an error has no error code.
    assert (result.result, result.is_error, result.error_code) == ("a picture", False, None)
    assert result.images == (PIXEL,)
    [tool_message] = [m for m in provider.inner.requests[1].messages if m.role == "tool"]
    assert tool_message.images == (PIXEL,)
    assert_history_valid(chat_client.conversation)


class _SeeingModels(ScriptedProvider):
    """Only the model named ``llava`` sees images."""

    async def model_capabilities(self, model: str) -> ollm.ModelCapabilities:
        return ollm.ModelCapabilities(vision=model == "llava")


@pytest.mark.parametrize(
    ("model", "sent"),
    [
        ("llava", (PIXEL,)),
        ("tiny", ()),
    ],
)
async def test_whether_images_go_to_the_model_is_asked_of_the_chats_own_model(
    anyio_backend: str, model: str, sent: tuple[ollm.ImagePart, ...]
) -> None:
    provider = _SeeingModels(Reply(tool_calls=[ollm.ToolCall("a", "picture", {})]), "seen")
    await collect(client(provider, tools=[picture], model=model).chat("go"))
    [tool_message] = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert tool_message.images == sent


async def test_with_react_installed_a_forced_native_refusal_is_not_told_to_install_it(
    anyio_backend: str,
) -> None:
    refusal = ollm.ErrorEvent("tiny does not support tools", "TOOLS_UNSUPPORTED")
    provider = ScriptedProvider(Reply(error=refusal))
    registries = ollm.Registries()
    registries.providers.register(provider)
    registries.strategies.register(ollm.StrategySpec("react", ollm.NativeStrategy))
    chat_client = ollm.ChatClient(registries, model="tiny", tools=[lookup], tool_strategy="native")
    events = await collect(chat_client.chat("q"))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert (error.message, error.code) == ("tiny does not support tools", "TOOLS_UNSUPPORTED")
    assert len(provider.requests) == 1  # forced native: no switch to ReAct


@pytest.mark.parametrize(
    ("length", "shown"),
    [(200, "x" * 200), (201, "x" * 200 + "...")],
)
async def test_arguments_that_cannot_be_used_are_quoted_up_to_200_characters(
    anyio_backend: str, length: int, shown: str
) -> None:
    bad = ollm.ToolCall("a", "lookup", invalid_args="x" * length)
    provider = ScriptedProvider(Reply(tool_calls=[bad]), "Sorry.")
    events = await collect(client(provider, tools=[lookup]).chat("go"))
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert result.result == (
        "Tool 'lookup' was not run: its arguments are not a JSON object (or are nested too "
        f"deeply): {shown!r}. Call it again with the arguments as one flat JSON object."
    )


class _SeesAll(ScriptedProvider):
    async def model_capabilities(self, model: str) -> ollm.ModelCapabilities:
        return ollm.ModelCapabilities(vision=True)


class _SeesNothing(ScriptedProvider):
    async def model_capabilities(self, model: str) -> ollm.ModelCapabilities:
        return ollm.ModelCapabilities(vision=False)


async def test_what_a_model_sees_is_remembered_per_provider_and_model(anyio_backend: str) -> None:
    def script() -> list[Reply | str]:
        return [Reply(tool_calls=[ollm.ToolCall("a", "picture", {})]), "seen"] * 2

    models = _SeeingModels(*script())
    seeing = _SeesAll(*script(), name="seeing")
    blind = _SeesNothing(*script(), name="blind")
    registries = ollm.Registries()
    for provider in (models, seeing, blind):
        registries.providers.register(provider)
    chat_client = ollm.ChatClient(registries, provider=models, tools=[picture])

    def sent(provider: ScriptedProvider) -> tuple[ollm.ImagePart, ...]:
        *_, last = [m for m in provider.requests[-1].messages if m.role == "tool"]
        return last.images

    await collect(chat_client.chat("go", model="llava"))
    assert sent(models) == (PIXEL,)
    await collect(chat_client.chat("go", model="tiny"))  # same provider, another model
    assert sent(models) == ()
    await collect(chat_client.chat("go", provider="seeing", model="m"))
    assert sent(seeing) == (PIXEL,)
    await collect(chat_client.chat("go", provider="blind", model="m"))  # same model name
    assert sent(blind) == ()


async def test_a_chat_cancelled_from_outside_while_its_tool_runs_keeps_the_call_in_history(
    anyio_backend: str,
) -> None:
    scope = anyio.CancelScope()

    @ollm.tool
    async def slow() -> str:
        """Take a long time."""
        scope.cancel()  # as a timeout around the chat would, while the tool runs
        await anyio.sleep_forever()
        return "never"

    call = ollm.ToolCall("a", "slow", {})
    provider = ScriptedProvider(Reply("Let me look.", tool_calls=[call]), "the answer")
    chat_client = client(provider, tools=[slow])
    seen: list[ollm.ChatEvent] = []
    with scope:
        async with chat_client.chat("go") as stream:
            async for event in stream:
                seen.append(event)
    assert scope.cancelled_caught
    assert not any(isinstance(e, ollm.ToolCallResultEvent) for e in seen)
    messages = chat_client.conversation.messages
    assert [(m.role, m.text) for m in messages] == [
        ("user", "go"),
        ("assistant", "Let me look."),
        ("tool", "Tool 'slow' did not run to its end: the chat was cancelled."),
    ]
    assert messages[1].tool_calls == (call,)
    assert messages[1].incomplete
    assert_history_valid(chat_client.conversation)
    # The conversation is free at once, and the next chat goes on from there.
    assert (await chat_client.run("and?")).text == "the answer"


async def test_the_chats_settings_reach_the_providers_request(anyio_backend: str) -> None:
    provider = ScriptedProvider("{}", "{}", "{}")
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    chat_client = client(
        provider,
        tools=[lookup],
        tool_choice="required",
        response_format=schema,
        think="high",
        system="Be brief.",
        context_window=8192,
    )
    await collect(chat_client.chat("q"))
    request = provider.requests[0]
    assert (request.tool_choice, request.response_format, request.think) == (
        "required",
        schema,
        "high",
    )
    assert (request.system_prompt, request.options.context_window) == ("Be brief.", 8192)
    # Without tools there is no choice to make.
    await collect(chat_client.chat("q", tools=[]))
    assert provider.requests[1].tool_choice == "auto"
    # A context window given in the options wins over the chat's.
    await collect(chat_client.chat("q", options=ollm.GenerationOptions(context_window=2048)))
    assert provider.requests[2].options.context_window == 2048


async def test_tool_choice_none_offers_no_tools_and_resolves_none(anyio_backend: str) -> None:
    provider = ScriptedProvider("plain words")
    # Not even a name that does not exist is looked up: no tool is wanted.
    chat_client = client(provider, tools=[lookup, "no_such_tool"], tool_choice="none")
    events = await collect(chat_client.chat("q"))
    assert_one_finish_last(events, "stop")
    assert provider.requests[0].tools == ()
    assert provider.requests[0].tool_choice == "auto"


async def test_each_setting_given_to_one_chat_wins_over_the_clients(anyio_backend: str) -> None:
    """Every keyword of chat() reaches that chat, and the client's defaults come back after."""

    used: list[str] = []

    class Recover(ollm.NativeStrategy):
        name = "recover"

        def stream(
            self, provider: ollm.ProviderAdapter, request: ollm.ProviderRequest
        ) -> AsyncIterator[ollm.ProviderEvent]:
            used.append(self.name)
            return super().stream(provider, request)

    class React(Recover):
        name = "react"

    @ollm.tool
    async def stuck() -> str:
        """Never answers."""
        await anyio.sleep_forever()
        return "never"

    two_calls = [ollm.ToolCall("a", "stuck", {}), ollm.ToolCall("b", "stuck", {})]
    provider = ScriptedProvider(Reply(tool_calls=two_calls), "done", "again", "third", "fourth")
    registries = ollm.Registries()
    registries.providers.register(provider)
    registries.strategies.register(ollm.StrategySpec("recover", Recover))
    registries.strategies.register(ollm.StrategySpec("react", React))
    chat_client = ollm.ChatClient(registries, tools=[stuck], tool_timeout=30)
    schema = {"type": "object"}
    events = await collect(
        chat_client.chat(
            "q",
            tool_choice="required",
            max_tool_calls=1,
            tool_timeout=0.01,
            context_window=2048,
            tool_strategy="react",
            recover_text_tool_calls=False,
            response_format=schema,
        )
    )
    request = provider.requests[0]
    assert (request.tool_choice, request.response_format) == ("required", schema)
    assert request.options.context_window == 2048
    assert used == ["react", "react"]  # the strategy chosen, not recovery
    results = [(e.error_code, e.result) for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert results == [
        ("TOOL_TIMEOUT", "Tool 'stuck' did not finish within 0.01 seconds."),
        (
            "TOOL_LIMIT",
            "Tool 'stuck' was not run: this chat reached its limit of 1 tool calls. "
            "Answer with what you have.",
        ),
    ]
    await collect(chat_client.chat("q", tools=[]))
    later = provider.requests[-1]
    assert (later.tool_choice, later.response_format, later.options.context_window) == (
        "auto",
        None,
        None,
    )
    assert (await chat_client.run("q")).text == "third"
    assert used == ["react", "react", "recover"]  # the client's own: recovery, automatically
    # Recovery turned off for one chat, the strategy left to the runtime: plain native.
    assert (await chat_client.run("q", recover_text_tool_calls=False)).text == "fourth"
    assert used == ["react", "react", "recover"]


NON_NEGATIVE = "max_tool_calls must be a non-negative integer"


@pytest.mark.parametrize(
    ("settings", "error", "words"),
    [
        ({"max_turns": 0}, ValueError, "max_turns must be a positive integer, not 0"),
        (
            {"max_tool_calls": -1},
            ValueError,
            "max_tool_calls must be a non-negative integer, not -1",
        ),
        (
            {"max_tool_calls": 1.5},
            ValueError,
            "max_tool_calls must be a non-negative integer, not 1.5",
        ),
        ({"tool_timeout": 0}, ValueError, "tool_timeout must be positive or None, not 0"),
        ({"tool_timeout": -1.0}, ValueError, "tool_timeout must be positive or None, not -1.0"),
        (
            {"context_window": 0},
            ValueError,
            'context_window must be a positive number of tokens or "auto", not 0',
        ),
        ({"tools": "lookup"}, TypeError, "tools must be a list of names or tools, not a string"),
        ({"tools": [42]}, TypeError, "a tool must be a name, a Tool or a function, not 42"),
        ({"options": {"temperature": 0}}, TypeError, "options must be a GenerationOptions"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_at_once_in_words(
    settings: dict[str, object], error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as refused:
        ollm.ChatClient(ollm.Registries(), provider=ScriptedProvider("x"), **settings)  # type: ignore[arg-type]
    assert str(refused.value) == words
    chat_client = ollm.ChatClient(ollm.Registries(), provider=ScriptedProvider("x"))
    with pytest.raises(error) as refused:
        chat_client.chat("hi", **settings)  # type: ignore[arg-type]
    assert str(refused.value) == words


def test_a_chat_refuses_a_prompt_or_signal_of_the_wrong_kind_in_words() -> None:
    chat_client = ollm.ChatClient(ollm.Registries(), provider=ScriptedProvider("x"))
    with pytest.raises(TypeError) as refused:
        chat_client.chat(42)  # type: ignore[arg-type]
    assert str(refused.value) == (
        "prompt must be text, a Message, or a list of TextPart and ImagePart"
    )
    with pytest.raises(TypeError) as refused:
        chat_client.chat("hi", abort="stop")  # type: ignore[arg-type]
    assert str(refused.value) == "abort must be an ollm.AbortSignal"
    assert len(chat_client.conversation) == 0


async def test_no_tool_calls_allowed_is_a_limit_of_zero(anyio_backend: str) -> None:
    provider = ScriptedProvider(Reply(tool_calls=[("lookup", {"query": "x"})]), "done")
    result = await client(provider, tools=[lookup], max_tool_calls=0).run("q")
    assert [r.error_code for r in result.tool_results] == ["TOOL_LIMIT"]
    assert result.text == "done"


async def test_one_chat_can_use_another_conversation_and_options_add_to_the_clients(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider("first", "second")
    chat_client = client(provider, options=ollm.GenerationOptions(temperature=0.2))
    other = ollm.Conversation()
    await collect(
        chat_client.chat("elsewhere", conversation=other, options=ollm.GenerationOptions(seed=3))
    )
    assert [m.text for m in other.messages] == ["elsewhere", "first"]
    assert len(chat_client.conversation) == 0
    options = provider.requests[0].options
    assert (options.temperature, options.seed) == (0.2, 3)
    assert (await chat_client.run("here")).text == "second"
    assert [m.text for m in chat_client.conversation.messages] == ["here", "second"]


def test_chat_settings_check_themselves_and_take_the_smallest_values_that_work() -> None:
    """ChatSettings is public: it refuses what cannot work even when built directly."""
    with pytest.raises(TypeError) as refused:
        ollm.ChatSettings(tools="lookup")  # type: ignore[arg-type]
    assert str(refused.value) == "tools must be a list of names or tools, not a string"
    with pytest.raises(TypeError) as refused:
        ollm.ChatSettings(options={"seed": 1})  # type: ignore[arg-type]
    assert str(refused.value) == "options must be a GenerationOptions"
    smallest = ollm.ChatSettings(
        max_turns=1, max_tool_calls=0, tool_timeout=0.001, context_window=1
    )
    assert (smallest.max_turns, smallest.max_tool_calls) == (1, 0)
    assert (smallest.tool_timeout, smallest.context_window) == (0.001, 1)


def test_a_conversation_takes_only_messages() -> None:
    conversation = ollm.Conversation()
    with pytest.raises(TypeError) as refused:
        conversation.append("hello")  # type: ignore[arg-type]
    assert str(refused.value) == "expected a Message, got str"
    assert len(conversation) == 0


class Pack:
    """The smallest toolset: a name, and open() that gives no tools."""

    def __init__(self, name: str) -> None:
        self.name = name

    def open(self) -> AbstractAsyncContextManager[Sequence[ollm.Tool]]:
        return contextlib.nullcontext(())  # type: ignore[return-value]


def test_a_client_keeps_each_toolset_once_and_refuses_what_is_not_one_in_words() -> None:
    git, files, web = Pack("git"), Pack("files"), Pack("web")
    chat_client = ollm.ChatClient(ollm.Registries(), toolsets=[git, files], tools=[git, web])
    assert chat_client.toolsets == (git, files, web)
    refusals: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"toolsets": "git"}, TypeError, TOOLSETS),
        ({"toolsets": [git, 42]}, TypeError, TOOLSETS),
        ({"toolsets": git}, TypeError, TOOLSETS),
        (
            {"toolsets": [git, Pack("git")]},
            ValueError,
            "two toolsets are named 'git': give each its own name, since the name prefixes"
            " its tools",
        ),
        ({"registries": {}}, TypeError, "registries must be an ollm.Registries"),
    ]
    for settings, error, words in refusals:
        with pytest.raises(error) as refused:
            ollm.ChatClient(**settings)
        assert str(refused.value) == words


TOOLSETS = "toolsets must be a list of toolsets (objects with a name and open())"


def test_the_limits_are_on_by_default_as_the_readme_says() -> None:
    settings = ollm.ChatClient(ollm.Registries()).settings
    assert (settings.max_turns, settings.max_tool_calls, settings.tool_timeout) == (10, 50, 60.0)


async def test_a_conversation_forks_extends_iterates_and_starts_afresh(anyio_backend: str) -> None:
    provider = ScriptedProvider("first", "second", "third")
    chat_client = client(provider)
    await chat_client.run("one")
    fork = chat_client.conversation.fork()
    await chat_client.run("two")
    assert [m.text for m in fork] == ["one", "first"]  # the fork is its own copy
    assert [m.text for m in chat_client.conversation] == ["one", "first", "two", "second"]
    # Iterating takes a snapshot: appending meanwhile changes the conversation, not the loop.
    seen = []
    for message in fork:
        seen.append(message.text)
        fork.append(ollm.Message.user("more"))
    assert (seen, len(fork)) == (["one", "first"], 4)
    fork.extend([ollm.Message.user("a"), ollm.Message.assistant("b")])
    assert [m.text for m in fork][-2:] == ["a", "b"]
    with pytest.raises(TypeError):
        fork.extend(["not a message"])  # type: ignore[list-item]
    fresh = chat_client.new_conversation()
    assert fresh is chat_client.conversation
    assert len(fresh) == 0
    await chat_client.run("three")
    assert [m.text for m in fresh] == ["three", "third"]


async def test_a_chat_result_shows_how_it_ended_in_its_repr(anyio_backend: str) -> None:
    result = await client(ScriptedProvider("x" * 100)).run("hi")
    assert repr(result) == f"ChatResult(finish_reason='stop', text={'x' * 60!r}, error=None)"
