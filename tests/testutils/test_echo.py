"""The echo provider: echoes, JSON scripts, a tool round trip, and its plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ollm
from ollm.errors import ErrorCode
from ollm.toolbox import calculate
from ollm_testutils import EchoProvider, EventCollector

pytestmark = pytest.mark.anyio


def request(*messages: ollm.Message, **fields: object) -> ollm.ProviderRequest:
    return ollm.ProviderRequest(model="echo", messages=messages, **fields)  # type: ignore[arg-type]


async def events_of(provider: EchoProvider, req: ollm.ProviderRequest) -> EventCollector:
    return await EventCollector().collect(provider.chat_stream(req))


async def test_echo_streams_the_prompt_word_by_word() -> None:
    events = await events_of(EchoProvider(), request(ollm.Message.user("Hello there,  world ")))
    assert [e.text for e in events.of_type(ollm.TextEvent)] == ["Hello", " there,", "  world", " "]
    assert events.text == "Hello there,  world "
    assert events.finish_reason == "stop"
    assert events.usage == ollm.Usage(prompt_tokens=3, completion_tokens=3, total_tokens=6)


async def test_echo_answers_the_last_user_message() -> None:
    events = await events_of(
        EchoProvider(),
        request(
            ollm.Message.user("first"), ollm.Message.assistant("x"), ollm.Message.user("second")
        ),
    )
    assert events.text == "second"


async def test_a_json_prompt_scripts_tool_calls() -> None:
    prompt = json.dumps(
        {
            "text": "Let me compute.",
            "tool_calls": [
                {"name": "calculate", "arguments": {"expression": "2+2"}},
                {"name": "lookup", "args": {"q": "x"}, "id": "mine"},
            ],
        }
    )
    events = await events_of(EchoProvider(), request(ollm.Message.user(prompt)))
    assert events.text == "Let me compute."
    assert [(c.id, c.name, c.args) for c in events.tool_calls] == [
        ("call_echo_1_0", "calculate", {"expression": "2+2"}),
        ("mine", "lookup", {"q": "x"}),
    ]
    events.assert_well_formed()


async def test_after_tool_results_it_answers_with_them() -> None:
    call = ollm.ToolCall("c1", "calculate", {"expression": "2+2"})
    other = ollm.ToolCall("c2", "current_time", {})
    events = await events_of(
        EchoProvider(),
        request(
            ollm.Message.user("{}"),
            ollm.Message.assistant(tool_calls=(call, other)),
            ollm.Message.tool("4", call=call),
            ollm.Message.tool("noon", call=other),
        ),
    )
    assert events.text == "calculate -> 4\ncurrent_time -> noon"


async def test_a_full_tool_round_trip_through_the_chat_client() -> None:
    registries = ollm.Registries()
    registries.providers.register(EchoProvider())
    client = ollm.ChatClient(registries, tools=[calculate])
    prompt = json.dumps({"tool_calls": [{"name": "calculate", "arguments": {"expression": "2+2"}}]})
    events = await EventCollector().collect(client.chat(prompt))
    events.assert_ok()
    assert events.tool_names == ["calculate"]
    assert [r.result for r in events.tool_results] == ["4"]
    assert events.final_text == "calculate -> 4"
    assert len(events.turns) == 2


async def test_ordinary_json_is_echoed() -> None:
    prompt = '{"name": "Ada", "text": "hi"}'
    events = await events_of(EchoProvider(), request(ollm.Message.user(prompt)))
    assert events.text == prompt
    assert not events.tool_calls


async def test_an_invalid_script_says_what_is_wrong() -> None:
    events = await events_of(EchoProvider(), request(ollm.Message.user('{"tool_calls": "x"}')))
    error = events.assert_error(ErrorCode.INVALID_REQUEST)
    assert "$.tool_calls" in error.message
    assert "arguments" in error.message
    assert events.types == ["error"]


async def test_scripted_thinking_errors_and_finish() -> None:
    prompt = json.dumps({"thinking": "hmm ok", "text": ["a", "b"], "finish": "length"})
    events = await events_of(EchoProvider(), request(ollm.Message.user(prompt)))
    assert events.thinking == "hmm ok"
    assert events.text == "ab"
    assert events.finish_reason == "length"
    failing = json.dumps({"text": "part", "error": {"message": "boom", "code": "TIMEOUT"}})
    events = await events_of(EchoProvider(), request(ollm.Message.user(failing)))
    assert events.text == "part"
    assert events.error_codes == ["TIMEOUT"]
    assert events.finish is None


async def test_a_hanging_script_waits_for_the_abort() -> None:
    registries = ollm.Registries()
    registries.providers.register(EchoProvider())
    client = ollm.ChatClient(registries)
    stream = client.chat(json.dumps({"text": "partial", "hang": True}))
    events = EventCollector()
    async for event in stream:
        events.add(event)
        if isinstance(event, ollm.TextEvent) and event.text == "partial":
            stream.abort()
    assert events.finish_reason == "cancelled"
    assert client.conversation.messages[-1].incomplete


async def test_echo_counts_tokens_as_words() -> None:
    provider = EchoProvider()
    assert isinstance(provider, ollm.TokenCounting)
    req = request(
        ollm.Message.user("one two three"),
        system_prompt="be brief",
        tools=(ollm.ToolSchema("f", "does things"),),
    )
    assert await provider.count_tokens(req) == 3 + 2 + 1 + 2
    assert await provider.count_tokens(request(ollm.Message.user(""))) == 1


async def test_echo_reports_its_capabilities() -> None:
    capabilities = await EchoProvider().model_capabilities("echo")
    assert capabilities.tools is True
    assert capabilities.context_window == 32768


async def test_delay_spaces_the_pieces() -> None:
    provider = EchoProvider(delay=0.01)
    events = await events_of(provider, request(ollm.Message.user("a b c")))
    assert events.text == "a b c"


@given(prompt=st.text(max_size=200))
async def test_property_10_echo_streams_provider_events_ending_in_one_finish(prompt: str) -> None:
    """Property 10: chat_stream is an async iterable of provider events (echo provider)."""
    provider = EchoProvider()
    stream = provider.chat_stream(request(ollm.Message.user(prompt)))
    events = [event async for event in stream]
    kinds = (ollm.TextEvent, ollm.ThinkingEvent, ollm.ToolCallEvent, ollm.NoticeEvent)
    assert all(isinstance(e, (*kinds, ollm.ErrorEvent, ollm.FinishEvent)) for e in events)
    ends = [e for e in events if isinstance(e, (ollm.FinishEvent, ollm.ErrorEvent))]
    assert len(ends) == 1
    assert ends[0] is events[-1]
    if isinstance(events[-1], ollm.FinishEvent) and not prompt.strip().startswith("{"):
        assert "".join(e.text for e in events if isinstance(e, ollm.TextEvent)) == prompt


@given(text=st.text(max_size=100), system=st.text(max_size=50))
async def test_property_11_echo_counts_a_positive_number_of_tokens(text: str, system: str) -> None:
    """Property 11: an adapter that counts tokens returns a positive count (echo provider)."""
    count = await EchoProvider().count_tokens(
        request(ollm.Message.user(text), system_prompt=system or None)
    )
    assert count >= 1


# -- the plugin ----------------------------------------------------------------------------


def _testutils_entry_point() -> metadata.EntryPoint:
    (found,) = [ep for ep in metadata.entry_points(group="ollm.plugins") if ep.name == "testutils"]
    return found


async def test_the_plugin_registers_the_echo_provider_not_as_default() -> None:
    registries = ollm.discover(
        settings=ollm.PluginSettings(strict=True), entry_points=[_testutils_entry_point()]
    )
    (record,) = registries.plugins
    assert record.status == "loaded"
    assert record.contributes == {"providers": ["echo"]}
    spec = registries.providers.spec("echo")
    assert spec.default is False
    assert "prompt" in spec.description
    provider = registries.providers.get("echo")
    assert isinstance(provider, EchoProvider)
    assert provider.default_model == "echo"
    result = await ollm.ChatClient(registries, provider="echo").run("no server needed")
    assert result.ok
    assert result.text == "no server needed"


async def test_the_plugin_module_is_cheap() -> None:
    code = (
        "import sys, ollm_testutils.plugin, ollm_testutils.pytest_plugin, ollm_testutils; "
        "bad = [m for m in sys.modules if m.startswith(('httpx', 'ollm_testutils.fake_ollama',"
        " 'ollm_testutils.echo', 'ollm_testutils.mock', 'ollm.runtime'))]; "
        "print(','.join(bad))"
    )
    result = await anyio.run_process([sys.executable, "-c", code])
    assert result.stdout.decode().strip() == ""


def _ollm(*args: str) -> subprocess.CompletedProcess[str]:
    command = Path(sys.executable).with_name("ollm")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "OLLAMA_"))}
    # Nothing listens here: the echo provider must not need a server.
    env.update(NO_COLOR="1", OLLAMA_HOST="127.0.0.1:9")
    return subprocess.run(
        [str(command), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_ollm_chat_with_the_echo_provider_needs_no_server() -> None:
    result = _ollm("chat", "-p", "echo", "hello there")
    assert (result.returncode, result.stdout.strip()) == (0, "hello there")


def test_ollm_chat_runs_a_tool_round_trip_offline() -> None:
    script = {"tool_calls": [{"name": "calculate", "arguments": {"expression": "2+2"}}]}
    result = _ollm("chat", "-p", "echo", "-t", "calculate", "--json", json.dumps(script))
    assert result.returncode == 0, result.stderr
    events = [ollm.decode_chat_event(line) for line in result.stdout.splitlines()]
    collected = EventCollector(events).assert_ok()
    assert [r.result for r in collected.tool_results] == ["4"]
    assert collected.final_text == "calculate -> 4"
