"""The whole loop through ``ChatClient``: tools run, history stays canonical, recovery works."""

from __future__ import annotations

from typing import Any

import pytest

import ollm
from ollm_testutils import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio

ACTION = 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}'
ANSWER = "Thought: I have it.\nFinal Answer: It is sunny in Paris."


def of(kind: type, events: list[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def client(
    registries: ollm.Registries, provider: ollm.ProviderAdapter, tools: Any, **kwargs: Any
) -> ollm.ChatClient:
    kwargs.setdefault("tool_strategy", "react")
    return ollm.ChatClient(registries, provider=provider, tools=tools, **kwargs)


async def test_thought_action_observation_final_answer(
    registries: ollm.Registries, tools: Any, calls: Any, collect: Any
) -> None:
    provider = ScriptedProvider(Reply([ACTION[:40], ACTION[40:]]), Reply(ANSWER))
    chat = client(registries, provider, tools, system="Answer briefly.")
    events = await collect(chat.chat("Weather in Paris?"))

    assert calls.calls == [("get_weather", {"city": "Paris", "units": "celsius"})]
    assert [e.call for e in of(ollm.ToolCallStartEvent, events)] == [
        ollm.ToolCall("react_1", "get_weather", {"city": "Paris"})
    ]
    assert "".join(e.text for e in of(ollm.TextEvent, events)) == "It is sunny in Paris."
    assert events[-1] == ollm.FinishEvent("stop", ollm.Usage())
    assert not of(ollm.ErrorEvent, events)

    # Each request is a text request: no tools, the instructions and the stop sequence.
    for sent in provider.requests:
        assert sent.tools == ()
        assert sent.system_prompt is not None
        assert sent.system_prompt.startswith("You can use tools to answer.")
        assert sent.system_prompt.endswith("\n\nAnswer briefly.")
        assert sent.options.stop == ("\nObservation:",)
    assert [(m.role, m.text) for m in provider.requests[1].messages] == [
        ("user", "Weather in Paris?"),
        ("assistant", ACTION),
        (
            "user",
            'Observation: {"city": "Paris", "temperature": 21, "units": "celsius", "sky": "sunny"}',
        ),
    ]
    # The conversation keeps ollm's canonical form.
    history = chat.conversation.messages
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[1].tool_calls == (ollm.ToolCall("react_1", "get_weather", {"city": "Paris"}),)
    assert history[1].thinking == "I need the weather."
    assert history[2].tool_call_id == "react_1"
    assert history[3] == ollm.Message.assistant("It is sunny in Paris.", thinking="I have it.")


async def test_the_history_holds_the_canonical_rendering(
    registries: ollm.Registries, tools: Any, collect: Any
) -> None:
    messy = (
        "**Thought:** weather!\n**Action:** `Get_Weather`\n**Action Input:**\n"
        "```json\n{'city': 'Paris',}\n```\nObservation: raining\nFinal Answer: rain"
    )
    provider = ScriptedProvider(Reply(messy), Reply(ANSWER))
    await collect(client(registries, provider, tools).chat("Weather?"))
    assert provider.requests[1].messages[1].text == (
        'Thought: weather!\nAction: get_weather\nAction Input: {"city": "Paris"}'
    )


async def test_bad_json_gets_an_observation_and_another_turn(
    registries: ollm.Registries, tools: Any, calls: Any, collect: Any
) -> None:
    bad = 'Thought: go\nAction: get_weather\nAction Input: {"city": Paris}'
    provider = ScriptedProvider(Reply(bad), Reply(ACTION), Reply(ANSWER))
    chat = client(registries, provider, tools)
    events = await collect(chat.chat("Weather?"))

    assert calls.calls == [("get_weather", {"city": "Paris", "units": "celsius"})]
    assert len(of(ollm.ToolCallStartEvent, events)) == 1
    history = chat.conversation.messages
    assert history[1] == ollm.Message.assistant(bad)
    correction = history[2]
    assert correction.role == "user"
    assert correction.text.startswith("Observation: Error: your reply could not be used:")
    assert "Expecting value at line 1, column 10" in correction.text
    assert "Action: get_weather\n" in correction.text
    assert "starts with Final Answer: and gives the answer itself" in correction.text
    assert provider.requests[1].messages[-1].text == correction.text
    assert events[-1].reason == "stop"


async def test_an_unknown_tool_gets_the_list_and_the_closest_name(
    registries: ollm.Registries, tools: Any, calls: Any, collect: Any
) -> None:
    wrong = 'Action: weather_now\nAction Input: {"city": "Paris"}'
    provider = ScriptedProvider(Reply(wrong), Reply(ANSWER))
    chat = client(registries, provider, tools)
    events = await collect(chat.chat("Weather?"))
    assert calls.calls == []
    assert not of(ollm.ToolCallStartEvent, events)
    correction = chat.conversation.messages[2].text
    assert "there is no tool named 'weather_now'" in correction
    assert "Did you mean get_weather?" in correction
    assert "The tools are: get_weather, search, current_time." in correction


async def test_the_same_call_a_third_time_is_not_run(
    registries: ollm.Registries, tools: Any, calls: Any, collect: Any
) -> None:
    provider = ScriptedProvider(Reply(ACTION), Reply(ACTION), Reply(ACTION), Reply(ANSWER))
    chat = client(registries, provider, tools)
    events = await collect(chat.chat("Weather?"))
    assert len(calls.calls) == 2
    results = of(ollm.ToolCallResultEvent, events)
    assert [r.is_error for r in results] == [False, False, True]
    refused = results[2].result
    assert "already called 2 times with these same arguments" in refused
    assert 'Its result was: {"city": "Paris", "temperature": 21' in refused
    # The call stays in the history with its refusal, so the model sees why.
    assert chat.conversation.messages[-3].tool_calls[0].id == results[2].call.id
    assert provider.requests[3].messages[-1].text.startswith('Observation: {"error": ')
    assert events[-1].reason == "stop"


async def test_too_many_format_errors_end_the_chat(
    registries: ollm.Registries, tools: Any, collect: Any
) -> None:
    provider = ScriptedProvider(Reply("Action: search"), repeat_last=True)
    chat = client(registries, provider, tools)
    events = await collect(chat.chat("Search it"))
    errors = of(ollm.ErrorEvent, events)
    assert [e.code for e in errors] == ["FORMAT_ERROR"]
    assert "last 3 replies were not in the ReAct format" in errors[0].message
    assert "the Action had no Action Input line after it" in errors[0].message
    assert events[-1].reason == "error"
    assert len(provider.requests) == 3
    corrections = [m for m in chat.conversation.messages if m.role == "user"][1:]
    assert len(corrections) == 2


async def test_a_valid_reply_resets_the_format_error_count(
    registries: ollm.Registries, tools: Any, collect: Any
) -> None:
    bad = Reply("Action: search")
    provider = ScriptedProvider(bad, bad, Reply(ACTION), bad, bad, Reply(ANSWER))
    events = await collect(client(registries, provider, tools).chat("Weather?"))
    assert not of(ollm.ErrorEvent, events)
    assert events[-1].reason == "stop"


async def test_a_second_thought_only_reply_is_the_answer(
    registries: ollm.Registries, tools: Any, collect: Any
) -> None:
    provider = ScriptedProvider(
        Reply("Thought: I wonder."), Reply("Thought: Paris is the capital of France.")
    )
    chat = client(registries, provider, tools)
    events = await collect(chat.chat("Capital of France?"))
    assert "".join(e.text for e in of(ollm.TextEvent, events)) == (
        "Paris is the capital of France."
    )
    assert events[-1].reason == "stop"
    history = chat.conversation.messages
    assert "a Thought but no Action and no Final Answer" in history[2].text
    assert history[-1] == ollm.Message.assistant("Paris is the capital of France.")


async def test_the_turn_limit_asks_for_a_final_answer_without_tools(
    registries: ollm.Registries, tools: Any, calls: Any, collect: Any
) -> None:
    provider = ScriptedProvider(
        Reply('Action: search\nAction Input: {"query": "a"}'),
        Reply('Action: search\nAction Input: {"query": "b"}'),
        Reply("Thought: enough.\nFinal Answer: ollm is a runtime."),
    )
    chat = client(registries, provider, tools, max_turns=2)
    events = await collect(chat.chat("What is ollm?"))
    assert len(calls.calls) == 2
    last = provider.requests[-1]
    assert last.tools == ()
    assert last.messages[-1].role == "user"
    assert "Do not use any tool now" in last.messages[-1].text
    assert "Final Answer:" in last.messages[-1].text
    assert "".join(e.text for e in of(ollm.TextEvent, events)) == "ollm is a runtime."
    assert events[-1].reason == "max_turns"
    # The request to wrap up is not part of the conversation.
    assert "Do not use any tool now" not in [m.text for m in chat.conversation.messages]


async def test_an_action_in_the_last_reply_runs_nothing_and_its_thought_is_shown(
    registries: ollm.Registries, tools: Any, calls: Any, collect: Any
) -> None:
    action = 'Thought: I should search again.\nAction: search\nAction Input: {"query": "a"}'
    provider = ScriptedProvider(Reply(action), Reply(action))
    events = await collect(client(registries, provider, tools, max_turns=1).chat("What?"))
    assert len(calls.calls) == 1
    assert len(of(ollm.ToolCallStartEvent, events)) == 1
    assert "".join(e.text for e in of(ollm.TextEvent, events)) == "I should search again."
    assert events[-1].reason == "max_turns"


async def test_the_stop_sequence_joins_the_users_own(
    registries: ollm.Registries, tools: Any, collect: Any
) -> None:
    provider = ScriptedProvider(Reply(ANSWER))
    options = ollm.GenerationOptions(stop=("END",), temperature=0.0)
    await collect(client(registries, provider, tools, options=options).chat("Hi"))
    assert provider.requests[0].options.stop == ("END", "\nObservation:")
    assert provider.requests[0].options.temperature == 0.0


async def test_abort_during_a_react_reply_cancels_cleanly(
    registries: ollm.Registries, tools: Any
) -> None:
    provider = ScriptedProvider(Reply.hanging(["Thought: hmm\nFinal Answer: par"]))
    stream = client(registries, provider, tools).chat("Hi")
    events: list[Any] = []
    async for event in stream:
        events.append(event)
        if isinstance(event, ollm.TextEvent):
            stream.abort()
    assert events[-1].reason == "cancelled"
    assert provider.open_streams == 0
    assert stream.conversation.messages[-1].incomplete


# -- choosing the strategy -------------------------------------------------------------


async def test_a_model_without_tool_capability_gets_react(
    registries: ollm.Registries, tools: Any, calls: Any, collect: Any
) -> None:
    provider = ScriptedProvider(
        Reply(ACTION), Reply(ANSWER), capabilities=ollm.ModelCapabilities(tools=False)
    )
    chat = client(registries, provider, tools, tool_strategy="auto", model="gemma2")
    events = await collect(chat.chat("Weather?"))
    notices = of(ollm.NoticeEvent, events)
    assert notices == [
        ollm.NoticeEvent("gemma2 cannot call tools natively: using ReAct.", "strategy")
    ]
    assert events.index(notices[0]) == 0
    assert len(calls.calls) == 1
    assert all(r.tools == () for r in provider.requests)


async def test_tools_unsupported_switches_to_react_and_is_remembered(
    registries: ollm.Registries, tools: Any, calls: Any, collect: Any
) -> None:
    unsupported = ollm.ErrorEvent(
        "registry.ollama.ai/library/gemma2:latest does not support tools", "TOOLS_UNSUPPORTED"
    )
    provider = ScriptedProvider(
        Reply(error=unsupported), Reply(ACTION), Reply(ANSWER), Reply(ANSWER)
    )
    chat = client(registries, provider, tools, tool_strategy="auto", model="gemma2")
    events = await collect(chat.chat("Weather?"))
    assert of(ollm.NoticeEvent, events) == [
        ollm.NoticeEvent(
            "gemma2 does not support native tool calling: switched to ReAct.", "strategy"
        )
    ]
    assert not of(ollm.ErrorEvent, events)
    assert len(calls.calls) == 1
    assert provider.requests[0].tools != ()  # the native attempt
    assert provider.requests[1].tools == ()  # the same turn again, as ReAct text
    assert provider.requests[1].messages == (ollm.Message.user("Weather?"),)

    # The next chat with that model goes straight to ReAct.
    events = await collect(chat.chat("And now?"))
    assert of(ollm.NoticeEvent, events) == [
        ollm.NoticeEvent("gemma2 cannot call tools natively: using ReAct.", "strategy")
    ]
    assert provider.requests[3].tools == ()
    assert events[-1].reason == "stop"


async def test_without_react_tools_unsupported_says_to_install_it(tools: Any, collect: Any) -> None:
    unsupported = ollm.ErrorEvent("gemma2 does not support tools", "TOOLS_UNSUPPORTED")
    provider = ScriptedProvider(Reply(error=unsupported))
    chat = client(ollm.Registries(), provider, tools, tool_strategy="auto", model="gemma2")
    events = await collect(chat.chat("Weather?"))
    errors = of(ollm.ErrorEvent, events)
    assert len(errors) == 1
    assert errors[0].code == "TOOLS_UNSUPPORTED"
    assert "pip install ollm-react" in errors[0].message
    assert events[-1].reason == "error"


async def test_discovery_registers_react_through_the_entry_point(
    tools: Any, calls: Any, collect: Any
) -> None:
    registries = ollm.discover(settings=ollm.PluginSettings(allow=frozenset({"react"})))
    assert set(registries.strategies.list()) == {"react", "react-example", "json-react", "recover"}
    record = next(r for r in registries.plugins if r.name == "react")
    assert record.status == "loaded"
    assert record.distribution == "ollm-react"

    provider = ScriptedProvider(Reply(ACTION), Reply(ANSWER))
    chat = client(registries, provider, tools, tool_strategy="react-example")
    events = await collect(chat.chat("Weather?"))
    assert len(calls.calls) == 1
    assert events[-1].reason == "stop"
    assert provider.requests[0].system_prompt is not None
    assert "made-up tool" in provider.requests[0].system_prompt


async def test_max_format_errors_is_an_option(tools: Any, collect: Any) -> None:
    from ollm_react import ReActStrategy

    registries = ollm.Registries()
    registries.strategies.register(
        ollm.StrategySpec("react", lambda: ReActStrategy(max_format_errors=1))
    )
    provider = ScriptedProvider(Reply("Action: search"), repeat_last=True)
    events = await collect(client(registries, provider, tools).chat("Hi"))
    assert [e.code for e in of(ollm.ErrorEvent, events)] == ["FORMAT_ERROR"]
    assert len(provider.requests) == 1
    with pytest.raises(ValueError, match="positive integer"):
        ReActStrategy(max_format_errors=0)
