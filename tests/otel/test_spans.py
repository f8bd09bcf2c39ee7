"""One chat as OpenTelemetry spans and metrics: the shape of the trace, its parents, its
attributes, the trace context sent to the server, and errors, on asyncio and trio.

The chat, on the fake OpenAI server: the model asks for the weather in two cities at
once (two tool calls, which wait for each other: they run in parallel tasks), then
answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from otel_helpers import Telemetry
from otel_helpers import chat as chat_scripted

import ollm
from ollm_openai import OpenAIProvider
from ollm_testutils import FakeOpenAIServer, OpenAIReply, Reply, ScriptedProvider

MODEL = "gpt-test"


def meeting_tools() -> Callable[..., Any]:
    """A tool whose two calls each wait for the other: they finish only in parallel."""
    arrived = {"Paris": anyio.Event(), "Rome": anyio.Event()}

    async def weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: Paris or Rome.
        """
        arrived[city].set()
        await arrived["Rome" if city == "Paris" else "Paris"].wait()
        return f"{city}: sunny"

    return weather


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def script(server: FakeOpenAIServer) -> None:
    server.script(
        OpenAIReply(
            tool_calls=[("weather", {"city": "Paris"}), ("weather", {"city": "Rome"})],
            usage=(20, 7),
        ),
        OpenAIReply(["Sunny ", "in both."], usage=(40, 4)),
    )


async def chat(server: FakeOpenAIServer, *middleware: object) -> ollm.ChatResult:
    client = ollm.ChatClient(
        ollm.Registries(),
        provider=OpenAIProvider(server.base_url, model=MODEL, environ={}),
        model=MODEL,
        tools=[meeting_tools()],
        middleware=list(middleware),
    )
    async with client:
        return await client.run("Weather in Paris and Rome?")


@pytest.mark.anyio
async def test_a_chat_with_two_parallel_calls_is_one_agent_two_chat_and_two_tool_spans(
    server: FakeOpenAIServer, telemetry: Telemetry
) -> None:
    script(server)
    result = await chat(server, telemetry.otel())
    assert result.ok, result
    assert result.text == "Sunny in both."

    [agent] = telemetry.named("invoke_agent")
    chats = telemetry.named("chat")
    tools = telemetry.named("execute_tool")
    assert len(telemetry.spans()) == 5
    assert [s.name for s in chats] == [f"chat {MODEL}", f"chat {MODEL}"]
    assert sorted(s.name for s in tools) == ["execute_tool weather"] * 2
    trace_id = agent.context.trace_id
    for span in [*chats, *tools]:
        assert span.context.trace_id == trace_id
        assert span.parent is not None
        assert span.parent.span_id == agent.context.span_id
    assert agent.parent is None
    # Every span says which conversation it belongs to.
    conversation = {s.attributes["gen_ai.conversation.id"] for s in telemetry.spans()}
    assert len(conversation) == 1
    assert conversation.pop()

    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.provider.name"] == "openai"
    assert agent.attributes["gen_ai.usage.input_tokens"] == 60
    assert agent.attributes["gen_ai.usage.output_tokens"] == 11

    first, second = sorted(chats, key=lambda s: s.start_time or 0)
    assert first.kind.name == "CLIENT"
    attributes = dict(first.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == MODEL
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["server.port"] == int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    assert attributes["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        20,
        7,
    )
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert second.attributes["gen_ai.response.time_to_first_chunk"] >= 0
    # The tools ran after the first reply ended, and before the second request.
    assert first.end_time is not None
    assert second.start_time is not None
    for tool in tools:
        assert first.end_time <= (tool.start_time or 0) <= (tool.end_time or 0) <= second.start_time

    calls = {s.attributes["gen_ai.tool.call.id"] for s in tools}
    made = {c.id for m in result.messages for c in m.tool_calls}
    assert calls == made
    assert len(calls) == 2
    assert {s.attributes["gen_ai.tool.type"] for s in tools} == {"function"}
    assert all("error.type" not in (s.attributes or {}) for s in telemetry.spans())


@pytest.mark.anyio
async def test_the_server_gets_the_traceparent_of_its_request_span(
    server: FakeOpenAIServer, telemetry: Telemetry
) -> None:
    script(server)
    assert (await chat(server, telemetry.otel())).ok
    chats = sorted(telemetry.named("chat"), key=lambda s: s.start_time or 0)
    sent = [str(r.headers.get("traceparent")).split("-") for r in server.chat_requests]
    assert [parts[:3] for parts in sent] == [
        ["00", f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}"] for s in chats
    ]
    assert all(int(parts[3], 16) & 1 for parts in sent)  # sampled


@pytest.mark.anyio
async def test_without_otel_no_traceparent_is_sent(server: FakeOpenAIServer) -> None:
    script(server)
    assert (await chat(server)).ok
    assert [r.headers.get("traceparent") for r in server.chat_requests] == [None, None]


@pytest.mark.anyio
async def test_a_failed_request_is_an_error_span_with_ollms_code(
    server: FakeOpenAIServer, telemetry: Telemetry
) -> None:
    server.script(OpenAIReply(status=404, error={"message": "The model does not exist"}))
    result = await chat(server, telemetry.otel())
    assert not result.ok
    assert result.error is not None
    code = result.error.code
    [agent] = telemetry.named("invoke_agent")
    [request] = telemetry.named("chat")
    for span in (agent, request):
        assert span.attributes["error.type"] == code
        assert span.status.status_code.name == "ERROR"
    durations = telemetry.metrics()["gen_ai.client.operation.duration"]
    assert [p.attributes.get("error.type") for p in durations] == [code]


@pytest.mark.anyio
async def test_metrics_are_the_conventions_histograms_with_their_buckets(
    server: FakeOpenAIServer, telemetry: Telemetry
) -> None:
    from ollm_otel import _names

    script(server)
    assert (await chat(server, telemetry.otel())).ok
    found = telemetry.metrics()
    durations = found["gen_ai.client.operation.duration"]
    assert sum(p.count for p in durations) == 2
    assert list(durations[0].explicit_bounds) == list(_names.DURATION_BUCKETS)
    tokens = found["gen_ai.client.token.usage"]
    by_type = {p.attributes["gen_ai.token.type"]: p.sum for p in tokens}
    assert by_type == {"input": 60, "output": 11}
    assert list(tokens[0].explicit_bounds) == list(_names.TOKEN_BUCKETS)
    first = found["gen_ai.client.operation.time_to_first_chunk"]
    assert sum(p.count for p in first) == 2
    assert list(first[0].explicit_bounds) == list(_names.FIRST_CHUNK_BUCKETS)
    for point in durations + tokens:
        assert point.attributes["gen_ai.operation.name"] == "chat"
        assert point.attributes["gen_ai.provider.name"] == "openai"
        assert point.attributes["gen_ai.request.model"] == MODEL


def broken(city: str) -> str:
    """Always fails.

    Args:
        city: A city.
    """
    raise RuntimeError("the weather service is down")


class Refuse:
    """Refuses every call of ``broken`` (inside otel: otel sees the refusal)."""

    def before_tool_call(self, ctx: ollm.MiddlewareContext, call: ollm.ToolCall) -> object:
        return ollm.Deny("not today")


@pytest.mark.anyio
@pytest.mark.parametrize(("inner", "code"), [((), "TOOL_FAILED"), ((Refuse(),), "TOOL_DENIED")])
async def test_a_failed_tool_call_is_an_error_span_and_the_chat_goes_on(
    telemetry: Telemetry, inner: tuple[object, ...], code: str
) -> None:
    provider = ScriptedProvider(Reply(tool_calls=[("broken", {"city": "Paris"})]), Reply("Sorry."))
    client = ollm.ChatClient(
        ollm.Registries(),
        provider=provider,
        model="scripted",
        tools=[broken],
        middleware=[telemetry.otel(), *inner],
    )
    async with client:
        result = await client.run("Weather?")
    assert result.ok
    assert [r.error_code for r in result.tool_results] == [code]
    [tool] = telemetry.named("execute_tool")
    assert tool.attributes["error.type"] == code
    assert tool.status.status_code.name == "ERROR"
    [agent] = telemetry.named("invoke_agent")
    assert "error.type" not in (agent.attributes or {})


@pytest.mark.anyio
async def test_a_chat_that_fails_before_its_first_request_still_has_its_span(
    telemetry: Telemetry,
) -> None:
    client = ollm.ChatClient(ollm.Registries(), model="m", middleware=[telemetry.otel()])
    async with client:
        result = await client.run("Hello?")
    assert not result.ok
    assert result.error is not None
    [agent] = telemetry.spans()
    assert agent.name == "invoke_agent"
    assert agent.attributes["error.type"] == result.error.code
    assert "gen_ai.provider.name" not in (agent.attributes or {})


@pytest.mark.anyio
async def test_a_chat_joins_the_trace_of_the_callers_current_span(telemetry: Telemetry) -> None:
    tracer = telemetry.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("handle request") as outer:
        assert (await chat_scripted(telemetry.otel())).ok
    [agent] = telemetry.named("invoke_agent")
    assert agent.parent is not None
    assert agent.parent.span_id == outer.get_span_context().span_id
    assert agent.context.trace_id == outer.get_span_context().trace_id
