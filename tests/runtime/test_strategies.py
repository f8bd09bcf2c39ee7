"""How the runtime picks and drives a tool-calling strategy (a stand-in plays ReAct here)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import msgspec
import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, collect

import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


@ollm.tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


class TextTools(ollm.NativeStrategy):
    """A stand-in for ReAct: sends no tools, turns "CALL name" text into a tool call."""

    name = "react"

    def __init__(self) -> None:
        self.requests: list[ollm.ProviderRequest] = []
        self.reviews = 0

    async def stream(  # type: ignore[override]
        self, provider: ollm.ProviderAdapter, request: ollm.ProviderRequest
    ) -> AsyncIterator[ollm.ProviderEvent]:
        text_request = msgspec.structs.replace(request, tools=())
        self.requests.append(text_request)
        async for event in provider.chat_stream(text_request):
            if isinstance(event, ollm.TextEvent) and event.text.startswith("CALL "):
                yield ollm.ToolCallEvent(ollm.ToolCall("t1", event.text[5:], {"q": "x"}))
            else:
                yield event


def _registries(provider: ollm.ProviderAdapter, strategy: type = TextTools) -> ollm.Registries:
    registries = ollm.Registries()
    registries.providers.register(provider)
    registries.strategies.register(ollm.StrategySpec("react", strategy))
    return registries


async def test_a_model_known_to_lack_tools_gets_react_with_a_notice(anyio_backend: str) -> None:
    provider = ScriptedProvider(
        "CALL lookup", "the answer", capabilities=ollm.ModelCapabilities(tools=False)
    )
    chat_client = ollm.ChatClient(_registries(provider), model="tiny", tools=[lookup])
    events = await collect(chat_client.chat("q"))
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent)]
    assert [(n.kind, n.message) for n in notices] == [
        ("strategy", "tiny cannot call tools natively: using ReAct.")
    ]
    assert all(r.tools == () for r in provider.requests)
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.result for r in results] == ["found x"]
    assert_one_finish_last(events, "stop")


class WithExample(TextTools):
    name = "react-example"


def _with_example(provider: ollm.ProviderAdapter) -> tuple[ollm.Registries, list[TextTools]]:
    """Registries with ``react-example`` too, and the list of the ones the chats made."""
    registries = _registries(provider)
    chosen: list[TextTools] = []

    def build() -> TextTools:
        chosen.append(WithExample())
        return chosen[-1]

    registries.strategies.register(ollm.StrategySpec("react-example", build))
    return registries, chosen


async def test_a_model_may_name_the_strategy_it_needs_instead_of_react(anyio_backend: str) -> None:
    capabilities = ollm.ModelCapabilities(tools=False, tool_strategy="react-example")
    provider = ScriptedProvider("CALL lookup", "the answer", capabilities=capabilities)
    registries, chosen = _with_example(provider)
    events = await collect(ollm.ChatClient(registries, model="tiny", tools=[lookup]).chat("q"))
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent)]
    assert [(n.kind, n.message) for n in notices] == [
        ("strategy", "tiny cannot call tools natively: using the react-example strategy.")
    ]
    assert len(chosen) == 1
    assert len(chosen[0].requests) == 2
    assert_one_finish_last(events, "stop")


async def test_a_named_strategy_that_is_not_installed_falls_back_to_react(
    anyio_backend: str,
) -> None:
    capabilities = ollm.ModelCapabilities(tools=False, tool_strategy="no-such-strategy")
    provider = ScriptedProvider("CALL lookup", "the answer", capabilities=capabilities)
    events = await collect(
        ollm.ChatClient(_registries(provider), model="tiny", tools=[lookup]).chat("q")
    )
    notices = [e for e in events if isinstance(e, ollm.NoticeEvent)]
    assert [n.message for n in notices] == ["tiny cannot call tools natively: using ReAct."]
    assert_one_finish_last(events, "stop")


async def test_a_named_strategy_that_is_not_installed_gives_way_to_the_fallback_named(
    anyio_backend: str,
) -> None:
    # ollm-llamacpp's capabilities: json-react, else (an older ollm-react) react-example.
    capabilities = ollm.ModelCapabilities(
        tools=False, tool_strategy="json-react", fallback_tool_strategy="react-example"
    )

    async def chosen(*installed: str) -> list[str]:
        provider = ScriptedProvider("CALL lookup", "the answer", capabilities=capabilities)
        registries = _registries(provider)
        for name in installed:
            registries.strategies.register(ollm.StrategySpec(name, WithExample))
        chat = ollm.ChatClient(registries, model="tiny", tools=[lookup])
        events = await collect(chat.chat("q"))
        assert_one_finish_last(events, "stop")
        return [e.message for e in events if isinstance(e, ollm.NoticeEvent)]

    assert await chosen("react-example") == [
        "tiny cannot call tools natively: using the react-example strategy."
    ]
    # Installed, the first choice wins.
    assert await chosen("react-example", "json-react") == [
        "tiny cannot call tools natively: using the json-react strategy."
    ]
    # Neither: plain ReAct.
    assert await chosen() == ["tiny cannot call tools natively: using ReAct."]


async def test_without_react_a_model_lacking_tools_fails_with_the_install_hint(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider("never", capabilities=ollm.ModelCapabilities(tools=False))
    registries = ollm.Registries()
    registries.providers.register(provider)
    events = await collect(ollm.ChatClient(registries, model="tiny", tools=[lookup]).chat("q"))
    error = next(e for e in events if isinstance(e, ollm.ErrorEvent))
    assert error.code == "TOOLS_UNSUPPORTED"
    assert error.message == (
        "tiny cannot call tools natively. To use tools with it, install ReAct support "
        "(pip install ollm-react), or chat without tools."
    )
    assert provider.requests == []


async def test_a_tools_unsupported_answer_switches_to_react_and_is_remembered(
    anyio_backend: str,
) -> None:
    refusal = ollm.ErrorEvent(
        "registry.ollama.ai/library/tiny:latest does not support tools", "TOOLS_UNSUPPORTED"
    )
    provider = ScriptedProvider(Reply(error=refusal), "CALL lookup", "done", "second chat")
    chat_client = ollm.ChatClient(_registries(provider), model="tiny", tools=[lookup])
    events = await collect(chat_client.chat("q"))
    assert not [e for e in events if isinstance(e, ollm.ErrorEvent)]
    notice = next(e for e in events if isinstance(e, ollm.NoticeEvent))
    assert notice.message == "tiny does not support native tool calling: switched to ReAct."
    assert [bool(r.tools) for r in provider.requests] == [True, False, False]
    assert_one_finish_last(events, "stop")
    assert_history_valid(chat_client.conversation)
    # The next chat with this model goes straight to ReAct.
    await collect(chat_client.chat("again"))
    assert provider.requests[-1].tools == ()
    assert len(provider.requests) == 4


@pytest.mark.parametrize("named", ["tool_strategy", "fallback_tool_strategy"])
async def test_a_tools_unsupported_answer_switches_to_the_strategy_the_model_names(
    anyio_backend: str, named: str
) -> None:
    """Capabilities that did not say "no tools" (unknown, or wrong) but name a strategy
    for a model without them: a refusal switches to that one, not to plain ReAct."""
    refusal = ollm.ErrorEvent("tiny does not support tools", "TOOLS_UNSUPPORTED")
    capabilities = ollm.ModelCapabilities(**{named: "react-example"})  # type: ignore[arg-type]
    provider = ScriptedProvider(
        Reply(error=refusal), "CALL lookup", "done", "second chat", capabilities=capabilities
    )
    registries, chosen = _with_example(provider)
    chat_client = ollm.ChatClient(registries, model="tiny", tools=[lookup])
    events = await collect(chat_client.chat("q"))
    assert not [e for e in events if isinstance(e, ollm.ErrorEvent)]
    notices = [e.message for e in events if isinstance(e, ollm.NoticeEvent)]
    assert notices == ["tiny does not support native tool calling: switched to react-example."]
    assert len(chosen) == 1
    assert [bool(r.tools) for r in provider.requests] == [True, False, False]
    assert_one_finish_last(events, "stop")
    assert_history_valid(chat_client.conversation)
    # The next chat with this model goes straight to it.
    await collect(chat_client.chat("again"))
    assert len(chosen) == 2
    assert provider.requests[-1].tools == ()


async def test_without_react_a_tools_unsupported_answer_says_to_install_it(
    anyio_backend: str,
) -> None:
    refusal = ollm.ErrorEvent("tiny does not support tools", "TOOLS_UNSUPPORTED")
    provider = ScriptedProvider(Reply(error=refusal))
    registries = ollm.Registries()
    registries.providers.register(provider)
    events = await collect(ollm.ChatClient(registries, model="tiny", tools=[lookup]).chat("q"))
    error = next(e for e in events if isinstance(e, ollm.ErrorEvent))
    assert error.message.startswith("tiny does not support tools. ")
    assert "pip install ollm-react" in error.message
    assert_one_finish_last(events, "error")


async def test_asking_for_native_never_switches(anyio_backend: str) -> None:
    refusal = ollm.ErrorEvent("tiny does not support tools", "TOOLS_UNSUPPORTED")
    provider = ScriptedProvider(Reply(error=refusal))
    chat_client = ollm.ChatClient(
        _registries(provider), model="tiny", tools=[lookup], tool_strategy="native"
    )
    events = await collect(chat_client.chat("q"))
    assert [e.code for e in events if isinstance(e, ollm.ErrorEvent)] == ["TOOLS_UNSUPPORTED"]
    assert len(provider.requests) == 1


class Reviewing(TextTools):
    """Exercises every kind of verdict a review can give."""

    def review(self, reply: ollm.Message) -> ollm.ReplyReview | None:
        self.reviews += 1
        if reply.text == "garbled":
            return ollm.ReplyReview(feedback="Observation: use the format.")
        if reply.text == "give up":
            return ollm.ReplyReview(error=ollm.ErrorEvent("too many bad replies", "FORMAT_ERROR"))
        if reply.tool_calls and self.reviews > 2:
            call = reply.tool_calls[0]
            return ollm.ReplyReview(results={call.id: "repeated; the result was: found x"})
        if reply.text == "just a thought":
            answer = ollm.Message.assistant("the thought is the answer")
            return ollm.ReplyReview(message=answer, events=(ollm.TextEvent(answer.text),))
        return None


async def test_review_feedback_adds_a_user_message_and_takes_another_turn(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider("garbled", "fine")
    chat_client = ollm.ChatClient(
        _registries(provider, Reviewing), tools=[lookup], tool_strategy="react"
    )
    events = await collect(chat_client.chat("q"))
    assert_one_finish_last(events, "stop")
    assert [m.text for m in chat_client.conversation.messages] == [
        "q",
        "garbled",
        "Observation: use the format.",
        "fine",
    ]


async def test_review_error_ends_the_chat(anyio_backend: str) -> None:
    provider = ScriptedProvider("give up")
    chat_client = ollm.ChatClient(
        _registries(provider, Reviewing), tools=[lookup], tool_strategy="react"
    )
    events = await collect(chat_client.chat("q"))
    assert [e.code for e in events if isinstance(e, ollm.ErrorEvent)] == ["FORMAT_ERROR"]
    assert_one_finish_last(events, "error")
    assert_history_valid(chat_client.conversation)


async def test_review_results_stop_a_call_from_running(anyio_backend: str) -> None:
    provider = ScriptedProvider("CALL lookup", "CALL lookup", "CALL lookup", "done")
    chat_client = ollm.ChatClient(
        _registries(provider, Reviewing), tools=[lookup], tool_strategy="react"
    )
    events = await collect(chat_client.chat("q"))
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.is_error for r in results] == [False, False, True]
    assert "repeated" in results[2].result
    assert_one_finish_last(events, "stop")


async def test_a_review_can_replace_the_reply_and_show_text(anyio_backend: str) -> None:
    provider = ScriptedProvider("just a thought")
    chat_client = ollm.ChatClient(
        _registries(provider, Reviewing), tools=[lookup], tool_strategy="react"
    )
    result = await chat_client.run("q")
    assert result.text == "just a thoughtthe thought is the answer"
    assert chat_client.conversation.messages[-1].text == "the thought is the answer"


class WrapsUp(TextTools):
    def wrap_up(self, request: ollm.ProviderRequest) -> ollm.ProviderRequest | None:
        final = ollm.Message.user("Give your final answer now.")
        return msgspec.structs.replace(request, tools=(), messages=(*request.messages, final))


async def test_at_the_turn_limit_a_strategy_may_ask_for_a_last_answer(anyio_backend: str) -> None:
    provider = ScriptedProvider("CALL lookup", repeat_last=True)
    provider.script.append(Reply("CALL lookup"))
    chat_client = ollm.ChatClient(
        _registries(provider, WrapsUp), tools=[lookup], tool_strategy="react", max_turns=2
    )
    events = await collect(chat_client.chat("q"))
    assert len(provider.requests) == 3
    assert provider.requests[2].messages[-1].text == "Give your final answer now."
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [r.error_code for r in results] == [None, None, "TOOL_LIMIT"]
    assert results[2].result == "Tool 'lookup' was not run: the chat reached its limit of 2 turns."
    assert results[2].is_error
    assert_one_finish_last(events, "max_turns")
    assert_history_valid(chat_client.conversation)


class Verbose(TextTools):
    """Sends a long system prompt: the runtime must count that, not the native request."""

    def prepare(self, request: ollm.ProviderRequest) -> ollm.ProviderRequest:
        return msgspec.structs.replace(request, system_prompt="x" * 4000, tools=())


async def test_the_tokens_counted_are_those_of_the_request_as_sent(anyio_backend: str) -> None:
    counted: list[ollm.ProviderRequest] = []

    def counter(request: ollm.ProviderRequest) -> int:
        counted.append(request)
        return ollm.estimate_text_tokens(request.system_prompt or "")

    provider = ScriptedProvider("never", token_counter=counter)
    chat_client = ollm.ChatClient(
        _registries(provider, Verbose),
        tools=[lookup],
        tool_strategy="react",
        context_window=500,
    )
    events = await collect(chat_client.chat("q"))
    assert counted[0].system_prompt == "x" * 4000
    assert [e.code for e in events if isinstance(e, ollm.ErrorEvent)] == ["TOKEN_LIMIT"]
    assert provider.requests == []


class Judges(TextTools):
    """Reviews that refuse a reply's calls, or find a call in its text."""

    def review(self, reply: ollm.Message) -> ollm.ReplyReview | None:
        if reply.text == "garbled":
            return ollm.ReplyReview(feedback="Observation: use the format.")
        if reply.text == "give up":
            return ollm.ReplyReview(error=ollm.ErrorEvent("too many bad replies", "FORMAT_ERROR"))
        if reply.text == "use lookup on y":
            found = ollm.ToolCall("r1", "lookup", {"q": "y"})
            return ollm.ReplyReview(message=ollm.Message.assistant("", tool_calls=(found,)))
        return None


CALL = ollm.ToolCall("t1", "lookup", {"q": "x"})
NOT_IN_FORMAT = "Tool 'lookup' was not run: the reply was not in the expected format."


async def test_calls_of_a_reply_sent_back_for_its_format_are_refused_in_words(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(Reply("garbled", tool_calls=[CALL]), "fine")
    chat_client = ollm.ChatClient(
        _registries(provider, Judges), tools=[lookup], tool_strategy="react"
    )
    events = await collect(chat_client.chat("q"))
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [(r.call, r.result, r.is_error, r.error_code) for r in results] == [
        (CALL, NOT_IN_FORMAT, True, "FORMAT_ERROR")
    ]
    assert [m.text for m in chat_client.conversation.messages] == [
        "q",
        "garbled",
        NOT_IN_FORMAT,
        "Observation: use the format.",
        "fine",
    ]
    assert_one_finish_last(events, "stop")


async def test_calls_of_a_reply_that_ends_the_chat_are_refused_in_words(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(Reply("give up", tool_calls=[CALL]))
    chat_client = ollm.ChatClient(
        _registries(provider, Judges), tools=[lookup], tool_strategy="react"
    )
    events = await collect(chat_client.chat("q"))
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert [(r.result, r.error_code) for r in results] == [(NOT_IN_FORMAT, "FORMAT_ERROR")]
    assert [e.message for e in events if isinstance(e, ollm.ErrorEvent)] == ["too many bad replies"]
    assert_one_finish_last(events, "error")
    assert_history_valid(chat_client.conversation)


async def test_a_call_found_by_the_review_is_announced_then_run(anyio_backend: str) -> None:
    provider = ScriptedProvider("use lookup on y", "done")
    chat_client = ollm.ChatClient(
        _registries(provider, Judges), tools=[lookup], tool_strategy="react"
    )
    events = await collect(chat_client.chat("q"))
    found = ollm.ToolCall("r1", "lookup", {"q": "y"})
    calls = [
        e for e in events if isinstance(e, (ollm.ToolCallStartEvent, ollm.ToolCallResultEvent))
    ]
    assert [(type(e).__name__, e.call, e.turn) for e in calls] == [
        ("ToolCallStartEvent", found, 1),
        ("ToolCallResultEvent", found, 1),
    ]
    assert [r.result for r in calls if isinstance(r, ollm.ToolCallResultEvent)] == ["found y"]
    turns = [e for e in events if isinstance(e, ollm.TurnCompleteEvent)]
    assert [(t.turn, t.tool_calls) for t in turns] == [(1, 1), (2, 0)]


U1 = ollm.Usage(prompt_tokens=10, completion_tokens=2, total_tokens=12)
U2 = ollm.Usage(prompt_tokens=20, completion_tokens=3, total_tokens=23)


class JudgesAndWrapsUp(Judges, WrapsUp):
    """Reviews replies, and asks for a last answer at the turn limit."""


async def test_a_malformed_last_answer_ends_the_chat_at_the_turn_limit(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(Reply("CALL lookup", usage=U1), Reply("garbled", usage=U2), "never")
    chat_client = ollm.ChatClient(
        _registries(provider, JudgesAndWrapsUp), tools=[lookup], tool_strategy="react", max_turns=1
    )
    events = await collect(chat_client.chat("q"))
    assert len(provider.requests) == 2  # the last answer, and no turn after it
    assert events[-1] == ollm.FinishEvent("max_turns", U1 + U2)
    assert chat_client.conversation.messages[-1] == ollm.Message.user(
        "Observation: use the format."
    )
    assert_history_valid(chat_client.conversation)


async def test_a_last_answer_at_the_turn_limit_finishes_with_the_chats_usage(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(Reply("CALL lookup", usage=U1), Reply("the answer", usage=U2))
    chat_client = ollm.ChatClient(
        _registries(provider, WrapsUp), tools=[lookup], tool_strategy="react", max_turns=1
    )
    events = await collect(chat_client.chat("q"))
    assert events[-1] == ollm.FinishEvent("max_turns", U1 + U2)
    assert chat_client.conversation.messages[-1].text == "the answer"


async def test_a_reply_that_ends_the_chat_finishes_it_with_the_usage_so_far(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider(Reply("CALL lookup", usage=U1), Reply("give up", usage=U2))
    chat_client = ollm.ChatClient(
        _registries(provider, Judges), tools=[lookup], tool_strategy="react"
    )
    events = await collect(chat_client.chat("q"))
    assert events[-1] == ollm.FinishEvent("error", U1 + U2)


class Refuses(TextTools):
    """A review that answers a call itself instead of letting it run."""

    def review(self, reply: ollm.Message) -> ollm.ReplyReview | None:
        if reply.tool_calls:
            return ollm.ReplyReview(results={"t1": "You called lookup three times already."})
        return None


async def test_a_call_the_review_answers_is_a_failed_result_with_the_reviews_words(
    anyio_backend: str,
) -> None:
    provider = ScriptedProvider("CALL lookup", "done")
    chat_client = ollm.ChatClient(
        _registries(provider, Refuses), tools=[lookup], tool_strategy="react"
    )
    events = await collect(chat_client.chat("q"))
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert (result.result, result.is_error, result.error_code) == (
        "Tool 'lookup' was not run: You called lookup three times already.",
        True,
        "TOOL_FAILED",
    )
    assert_one_finish_last(events, "stop")


async def test_the_turn_retried_after_a_switch_to_react_is_still_the_first(
    anyio_backend: str,
) -> None:
    refusal = ollm.ErrorEvent("tiny does not support tools", "TOOLS_UNSUPPORTED")
    provider = ScriptedProvider(Reply(error=refusal), "CALL lookup", "done")
    chat_client = ollm.ChatClient(
        _registries(provider, WrapsUp), model="tiny", tools=[lookup], max_turns=1
    )
    events = await collect(chat_client.chat("q"))
    # The refused request does not count: the one turn allowed runs the tool.
    [start] = [e for e in events if isinstance(e, ollm.ToolCallStartEvent)]
    assert start.turn == 1
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert (result.result, result.turn) == ("found x", 1)
    assert [e.turn for e in events if isinstance(e, ollm.TurnCompleteEvent)] == [1, 2]
    assert chat_client.conversation.messages[-1].text == "done"


async def test_a_refusal_of_tools_is_remembered_for_that_model_only(anyio_backend: str) -> None:
    refusal = ollm.ErrorEvent("tiny does not support tools", "TOOLS_UNSUPPORTED")
    provider = ScriptedProvider(Reply(error=refusal), "fine", "big answer", "tiny again")
    chat_client = ollm.ChatClient(_registries(provider), model="tiny", tools=[lookup])
    await collect(chat_client.chat("q"))
    assert [bool(r.tools) for r in provider.requests] == [True, False]
    await collect(chat_client.chat("q", model="big"))  # another model: native again
    assert provider.requests[-1].tools
    await collect(chat_client.chat("q"))
    assert provider.requests[-1].tools == ()


class Broken(TextTools):
    """A strategy with a bug: its review raises."""

    def review(self, reply: ollm.Message) -> ollm.ReplyReview | None:
        raise RuntimeError("review bug")


async def test_a_bug_in_a_strategy_is_an_internal_error_and_the_calls_get_results(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    provider = ScriptedProvider(Reply("CALL lookup", usage=U1), "after")
    chat_client = ollm.ChatClient(
        _registries(provider, Broken), tools=[lookup], tool_strategy="react"
    )
    with caplog.at_level(logging.ERROR, logger="ollm.runtime.run"):
        events = await collect(chat_client.chat("q"))
    assert events[1:] == [
        ollm.ToolCallResultEvent(
            CALL,
            "Tool 'lookup' did not run to its end: an error occurred.",
            True,
            "CANCELLED",
            0.0,
            1,
        ),
        ollm.ErrorEvent(
            "Unexpected error: RuntimeError: review bug. The conversation is intact; please "
            "report this with the steps that led to it.",
            "INTERNAL_ERROR",
        ),
        ollm.FinishEvent("error", U1),
    ]
    [record] = caplog.records
    assert record.getMessage() == "unexpected error in a chat"
    assert record.exc_info is not None
    assert_history_valid(chat_client.conversation)


async def test_a_refusal_of_tools_is_remembered_for_that_provider_only(anyio_backend: str) -> None:
    refusal = ollm.ErrorEvent("tiny does not support tools", "TOOLS_UNSUPPORTED")
    local = ScriptedProvider(Reply(error=refusal), "fine", "again", name="local")
    remote = ScriptedProvider("remote answer", name="remote")
    registries = ollm.Registries()
    registries.providers.register(local)
    registries.providers.register(remote)
    registries.strategies.register(ollm.StrategySpec("react", TextTools))
    chat_client = ollm.ChatClient(registries, provider="local", model="tiny", tools=[lookup])
    await collect(chat_client.chat("q"))
    await collect(chat_client.chat("q", provider="remote"))  # the same model name elsewhere
    assert remote.requests[0].tools
    await collect(chat_client.chat("q"))
    assert [bool(r.tools) for r in local.requests] == [True, False, False]


class Asked(ScriptedProvider):
    """Counts the times the runtime asks what a model can do."""

    asked = 0

    async def model_capabilities(self, model: str) -> ollm.ModelCapabilities:
        self.asked += 1
        return await super().model_capabilities(model)


async def test_with_a_context_window_given_the_model_is_still_asked_about_tools(
    anyio_backend: str,
) -> None:
    """The window is known, but whether the model calls tools natively is not."""
    provider = Asked("CALL lookup", "the answer", capabilities=ollm.ModelCapabilities(tools=False))
    chat_client = ollm.ChatClient(
        _registries(provider), model="tiny", tools=[lookup], context_window=4096
    )
    events = await collect(chat_client.chat("q"))
    assert [n.kind for n in events if isinstance(n, ollm.NoticeEvent)] == ["strategy"]
    assert all(r.tools == () for r in provider.requests)
    assert provider.asked == 1
    assert_one_finish_last(events, "stop")


@pytest.mark.parametrize(
    ("tools", "strategy"), [((), "auto"), ([lookup], "native"), ([lookup], "react")]
)
async def test_with_a_context_window_given_nothing_else_needs_asking(
    anyio_backend: str, tools: list[ollm.Tool], strategy: str
) -> None:
    """No tools, or a strategy chosen: the window given is all the runtime needs."""
    provider = Asked("the answer", capabilities=ollm.ModelCapabilities(tools=True))
    chat_client = ollm.ChatClient(
        _registries(provider),
        model="tiny",
        tools=tools,
        context_window=4096,
        tool_strategy=strategy,
    )
    assert (await chat_client.run("q")).text == "the answer"
    assert provider.asked == 0
