"""Middleware around a chat's requests, events, messages and tool calls: the onion's order,
rewrites that reach the tool and the history, refusals, and failures that end the chat
with one MIDDLEWARE_FAILED and leave the history intact."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import anyio
import pytest
from runtime_helpers import assert_history_valid, assert_one_finish_last, client, collect

import ollm
from ollm.logs import LogStore
from ollm_testutils.mock import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


class Recorder:
    """A middleware that notes each of its calls (``log`` is shared between several)."""

    def __init__(self, name: str, log: list[tuple[str, str]]) -> None:
        self.name = name
        self.log = log

    async def on_request(self, ctx: ollm.MiddlewareContext, request: ollm.ProviderRequest) -> Any:
        self.log.append((self.name, f"request {ctx.turn}"))
        return request

    async def on_event(self, ctx: ollm.MiddlewareContext, event: ollm.ChatEvent) -> Any:
        self.log.append((self.name, f"event {event.type}"))
        return event

    async def before_tool_call(self, ctx: ollm.MiddlewareContext, call: ollm.ToolCall) -> Any:
        self.log.append((self.name, f"before {call.name}"))
        return call

    async def after_tool_call(
        self, ctx: ollm.MiddlewareContext, call: ollm.ToolCall, result: ollm.ToolResult
    ) -> Any:
        self.log.append((self.name, f"after {call.name}"))
        return result

    async def on_message(self, ctx: ollm.MiddlewareContext, message: ollm.Message) -> Any:
        self.log.append((self.name, f"message {message.role}"))
        return message

    async def on_finish(self, ctx: ollm.MiddlewareContext, finish: ollm.FinishEvent) -> None:
        self.log.append((self.name, f"finish {finish.reason}"))


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def calling(name: str, **args: Any) -> Reply:
    return Reply(tool_calls=[(name, args)])


async def test_the_first_named_is_outermost(anyio_backend: str) -> None:
    log: list[tuple[str, str]] = []
    provider = ScriptedProvider(calling("add", a=1, b=2), Reply("3"))
    chat_client = client(
        provider, tools=[add], middleware=[Recorder("outer", log), Recorder("inner", log)]
    )
    events = await collect(chat_client.chat("1+2?"))
    assert_one_finish_last(events, "stop")

    def order(step: str) -> list[str]:
        return [name for name, what in log if what == step]

    assert order("request 1") == ["outer", "inner"]
    assert order("before add") == ["outer", "inner"]
    assert order("after add") == ["inner", "outer"]
    assert order("message user") == ["inner", "outer"]
    assert order("event text") == ["inner", "outer"]
    assert order("finish stop") == ["inner", "outer"]
    assert [what for name, what in log if name == "outer"] == [
        "message user",
        "request 1",
        "event tool_call_start",
        "before add",
        "after add",
        "message assistant",
        "message tool",
        "event tool_call_result",
        "event turn_complete",
        "request 2",
        "event text",
        "message assistant",
        "event turn_complete",
        "event finish",
        "finish stop",
    ]


async def test_a_rewritten_call_reaches_the_tool_and_the_log_keeps_both(
    anyio_backend: str, tmp_path: Any
) -> None:
    received: list[int] = []

    @ollm.tool
    def double_me(n: int) -> int:
        """Return n.

        Args:
            n: A number.
        """
        received.append(n)
        return n

    class Doubler:
        def before_tool_call(self, ctx: ollm.MiddlewareContext, call: ollm.ToolCall) -> Any:
            return ollm.ToolCall(call.id, call.name, {"n": call.args["n"] * 2})

    provider = ScriptedProvider(calling("double_me", n=21), Reply("done"))
    chat_client = client(provider, tools=[double_me], middleware=[Doubler()])
    events = await collect(chat_client.chat("go"))
    assert received == [42]
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert result.result == "42"
    assert result.call.args == {"n": 42}
    assert result.call.original_args == {"n": 21}
    # The model is told of the call as it ran, and the history keeps what it asked.
    assert provider.requests[1].messages[1].tool_calls[0].args == {"n": 42}
    with LogStore(tmp_path / "logs.db") as logs:
        cid = logs.save(chat_client.conversation)
        [call] = logs.load(cid).messages[1].tool_calls
    assert (call.args, call.original_args) == ({"n": 42}, {"n": 21})


async def test_deny_keeps_the_tool_from_running_and_the_model_reads_why(
    anyio_backend: str,
) -> None:
    ran: list[str] = []

    @ollm.tool
    def launch(target: str) -> str:
        """Launch.

        Args:
            target: Where to.
        """
        ran.append(target)
        return "launched"

    class Guard:
        async def before_tool_call(self, ctx: ollm.MiddlewareContext, call: ollm.ToolCall) -> Any:
            return ollm.Deny("launches are not allowed on Sundays")

    provider = ScriptedProvider(calling("launch", target="moon"), Reply("Understood."))
    chat_client = client(provider, tools=[launch], middleware=[Guard()])
    events = await collect(chat_client.chat("launch"))
    assert ran == []
    assert_one_finish_last(events, "stop")
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert (result.is_error, result.error_code) == (True, "TOOL_DENIED")
    told = provider.requests[1].messages[-1]
    assert told.role == "tool"
    assert "launches are not allowed on Sundays" in told.text
    assert_history_valid(chat_client.conversation)


class Raises:
    """Raises in one method."""

    def __init__(self, hook: str) -> None:
        self.name = "boom"
        setattr(self, hook, self._raise)

    async def _raise(self, *args: Any) -> Any:
        raise RuntimeError("the middleware broke")


HOOKS = [
    "on_request",
    "on_event",
    "before_tool_call",
    "after_tool_call",
    "on_message",
    "on_finish",
]


@pytest.mark.parametrize("hook", HOOKS)
async def test_a_raising_middleware_ends_the_chat_with_one_error_and_the_next_chat_works(
    anyio_backend: str, hook: str
) -> None:
    provider = ScriptedProvider(calling("add", a=1, b=2), Reply("3"), Reply("again"))
    chat_client = client(provider, tools=[add])
    events = await collect(chat_client.chat("1+2?", middleware=[Raises(hook)]))
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert [e.code for e in errors] == ["MIDDLEWARE_FAILED"]
    assert errors[0].message.startswith(
        f"Middleware 'boom' failed in {hook}: RuntimeError: the middleware broke."
    )
    assert "Traceback" not in errors[0].message
    assert_one_finish_last(events, "error")
    assert_history_valid(chat_client.conversation)
    assert not chat_client.conversation.busy
    result = await chat_client.run("and now?")
    assert result.ok
    assert_history_valid(chat_client.conversation)


async def test_a_middleware_past_its_timeout_ends_the_chat(anyio_backend: str) -> None:
    class Stuck:
        async def on_request(self, ctx: Any, request: Any) -> Any:
            await anyio.sleep_forever()

    chat_client = client(ScriptedProvider("hello"), middleware=[Stuck()], middleware_timeout=0.01)
    events = await collect(chat_client.chat("hi"))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "MIDDLEWARE_FAILED"
    assert "'Stuck' did not answer within 0.01 seconds in on_request" in error.message
    assert_one_finish_last(events, "error")


@pytest.mark.parametrize(
    "hook", ["on_request", "on_event", "before_tool_call", "after_tool_call", "on_message"]
)
async def test_abort_while_any_method_waits_finishes_cancelled_never_failed(
    anyio_backend: str, hook: str
) -> None:
    """A slow ``on_request`` among them: nothing is sent, the chat ends ``cancelled``."""
    waiting = anyio.Event()
    added: list[int] = []

    async def stuck(self: Any, ctx: Any, *args: Any) -> Any:
        waiting.set()
        await anyio.sleep_forever()

    Stuck = type("Stuck", (), {hook: stuck})

    @ollm.tool
    def counted(a: int) -> int:
        """Count.

        Args:
            a: A number.
        """
        added.append(a)
        return a

    provider = ScriptedProvider(calling("counted", a=1), Reply("never"))
    chat_client = client(provider, tools=[counted], middleware=[Stuck()], middleware_timeout=None)
    stream = chat_client.chat("count")
    events: list[ollm.ChatEvent] = []

    async def consume() -> None:
        events.extend(await collect(stream))

    with anyio.fail_after(30):  # a hang detector, not a measure
        async with anyio.create_task_group() as group:
            group.start_soon(consume)
            await waiting.wait()
            stream.abort()
    assert_one_finish_last(events, "cancelled")
    assert not [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert added == ([1] if hook == "after_tool_call" else [])
    assert len(provider.requests) == (0 if hook in ("on_request", "on_message") else 1)
    for result in [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]:
        assert "a middleware failed" not in result.result
    for message in chat_client.conversation:
        assert "a middleware failed" not in message.text, message
    assert_history_valid(chat_client.conversation)


async def test_an_installed_middleware_that_is_not_named_is_never_built_or_called(
    anyio_backend: str,
) -> None:
    calls: list[str] = []

    class Counting:
        def on_request(self, ctx: Any, request: Any) -> Any:
            calls.append("request")
            return request

    def build() -> Counting:
        calls.append("built")
        return Counting()

    registries = ollm.Registries()
    registries.middleware.register(ollm.MiddlewareSpec("counting", build, "counts"))
    chat_client = ollm.ChatClient(registries, provider=ScriptedProvider("a", "b", "c"))
    await chat_client.run("one")
    async with chat_client.chat("two") as stream:
        await collect(stream)
    assert calls == []
    await chat_client.run("three", middleware=["counting"])
    assert calls == ["built", "request"]


async def test_a_named_middleware_is_built_once_per_client(anyio_backend: str) -> None:
    built: list[object] = []

    class Counting:
        def on_request(self, ctx: Any, request: Any) -> Any:
            return request

    def build() -> Counting:
        built.append(Counting())
        return built[-1]

    registries = ollm.Registries()
    registries.middleware.register(ollm.MiddlewareSpec("counting", build))
    chat_client = ollm.ChatClient(
        registries, provider=ScriptedProvider("a", "b"), middleware=["counting"]
    )
    await chat_client.run("one")
    await chat_client.run("two")
    assert len(built) == 1


async def test_an_unknown_middleware_name_is_an_error_that_lists_the_installed(
    anyio_backend: str,
) -> None:
    registries = ollm.Registries()
    registries.middleware.register(ollm.MiddlewareSpec("audit", lambda: Recorder("a", [])))
    chat_client = ollm.ChatClient(registries, provider=ScriptedProvider("a"))
    result = await chat_client.run("hi", middleware=["audti"])
    assert result.error is not None
    assert result.error.code == "PLUGIN_ERROR"
    assert "No middleware is named 'audti'. Installed: audit" in result.error.message


async def test_on_event_transforms_drops_and_adds_but_the_finish_stays_last(
    anyio_backend: str,
) -> None:
    class Loud:
        def on_event(self, ctx: Any, event: ollm.ChatEvent) -> Any:
            if isinstance(event, ollm.TextEvent):
                return ollm.TextEvent(event.text.upper())
            if isinstance(event, ollm.TurnCompleteEvent):
                return None
            if isinstance(event, ollm.FinishEvent):
                return [ollm.NoticeEvent("bye")]  # the finish itself left out
            return event

    events = await collect(
        client(ScriptedProvider(Reply(["he", "llo"]))).chat("hi", middleware=[Loud()])
    )
    assert [type(e).__name__ for e in events] == [
        "TextEvent",
        "TextEvent",
        "NoticeEvent",
        "FinishEvent",
    ]
    assert [e.text for e in events if isinstance(e, ollm.TextEvent)] == ["HE", "LLO"]
    assert_one_finish_last(events, "stop")


async def test_what_a_middleware_returns_is_checked(anyio_backend: str) -> None:
    class Wrong:
        def on_request(self, ctx: Any, request: Any) -> Any:
            return "a string"

    events = await collect(client(ScriptedProvider("hi")).chat("hi", middleware=[Wrong()]))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "MIDDLEWARE_FAILED"
    assert "'Wrong' returned str from on_request; it must return a ProviderRequest" in (
        error.message
    )


async def test_a_call_of_another_tool_is_refused(anyio_backend: str) -> None:
    class Swap:
        def before_tool_call(self, ctx: Any, call: ollm.ToolCall) -> Any:
            return ollm.ToolCall(call.id, "rm_rf", call.args)

    provider = ScriptedProvider(calling("add", a=1, b=2), Reply("3"))
    chat_client = client(provider, tools=[add], middleware=[Swap()])
    events = await collect(chat_client.chat("hi"))
    [error] = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert error.code == "MIDDLEWARE_FAILED"
    assert_history_valid(chat_client.conversation)
    [result] = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert "a middleware failed" in result.result


async def test_on_request_may_change_the_request(anyio_backend: str) -> None:
    class Other:
        async def on_request(self, ctx: Any, request: ollm.ProviderRequest) -> Any:
            return ollm.ProviderRequest(
                model="other-model",
                messages=(*request.messages, ollm.Message.user("(be brief)")),
            )

    provider = ScriptedProvider("ok")
    await client(provider, middleware=[Other()]).run("hi")
    sent = provider.requests[0]
    assert sent.model == "other-model"
    assert [m.text for m in sent.messages] == ["hi", "(be brief)"]
    assert sent.abort is not None  # the chat's signal, whatever the middleware built


async def test_after_tool_call_changes_what_the_model_reads(anyio_backend: str) -> None:
    class Hide:
        def after_tool_call(self, ctx: Any, call: Any, result: ollm.ToolResult) -> Any:
            return ollm.ToolResult(result.text.replace("3", "[number]"))

    provider = ScriptedProvider(calling("add", a=1, b=2), Reply("ok"))
    await client(provider, tools=[add], middleware=[Hide()]).run("1+2")
    assert provider.requests[1].messages[-1].text == "[number]"


async def test_plain_methods_run_in_a_worker_thread(anyio_backend: str) -> None:
    threads: set[int] = set()

    class Plain:
        def on_request(self, ctx: Any, request: Any) -> Any:
            threads.add(threading.get_ident())
            return request

    await client(ScriptedProvider("hi"), middleware=[Plain()]).run("hi")
    assert threads
    assert threading.get_ident() not in threads


STUCK_FOR_EVER = """
import sys, threading
import anyio, ollm
from ollm_testutils.mock import ScriptedProvider

class Stuck:
    def on_request(self, ctx, request):
        threading.Event().wait()  # never returns

async def main():
    client = ollm.ChatClient(
        ollm.Registries(), provider=ScriptedProvider("hello"), middleware=[Stuck()],
        middleware_timeout=0.05,
    )
    result = await client.run("hi")
    print(result.error.code if result.error else "no error", flush=True)

anyio.run(main, backend=sys.argv[1])
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_plain_method_stuck_for_ever_ends_the_chat_and_lets_the_process_exit(
    backend: str,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", STUCK_FOR_EVER, backend],
        capture_output=True,
        text=True,
        timeout=120,  # a hang detector: the process must exit at all, however slowly
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "MIDDLEWARE_FAILED\n"


async def test_the_context_names_the_chat(anyio_backend: str) -> None:
    seen: list[tuple[Any, ...]] = []

    class Look:
        async def on_request(self, ctx: ollm.MiddlewareContext, request: Any) -> Any:
            seen.append((ctx.client, ctx.conversation_id, ctx.turn, ctx.provider, ctx.model))
            return request

    provider = ScriptedProvider(calling("add", a=1, b=2), Reply("3"))
    chat_client = client(provider, tools=[add], middleware=[Look()])
    await chat_client.run("go")
    cid = chat_client.conversation.id
    assert seen == [
        (chat_client, cid, 1, "scripted", "mock-model"),
        (chat_client, cid, 2, "scripted", "mock-model"),
    ]


async def test_a_middleware_object_needs_a_middleware_method() -> None:
    with pytest.raises(TypeError, match="is not a middleware"):
        ollm.ChatClient(ollm.Registries(), middleware=[object()])
    with pytest.raises(TypeError, match="list of names"):
        ollm.ChatClient(ollm.Registries(), middleware="audit")  # type: ignore[arg-type]


async def test_a_chat_left_before_its_finish_tells_on_finish_it_was_cancelled(
    anyio_backend: str,
) -> None:
    log: list[tuple[str, str]] = []
    chat_client = client(ScriptedProvider("hello there", "again"), middleware=[Recorder("r", log)])
    stream = chat_client.chat("hi")
    async for event in stream:
        if isinstance(event, ollm.TextEvent):
            break  # the caller has what it wanted
    await stream.aclose()
    assert log[-1] == ("r", "finish cancelled")
    assert [entry for entry in log if entry[1].startswith("finish")] == [("r", "finish cancelled")]
    assert not chat_client.conversation.busy
    assert_history_valid(chat_client.conversation)
    assert (await chat_client.run("and now?")).ok
