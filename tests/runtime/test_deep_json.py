"""JSON nested a thousand levels deep, from a provider or a model: an error, never a crash."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest
from cli_helpers import OLLM, ollm_env
from hypothesis import given
from hypothesis import strategies as st
from raw_http import chunked, ok, raw_server
from runtime_helpers import assert_history_valid, client

import ollm
from ollm.types.depth import MAX_JSON_DEPTH, nests_deeper_than
from ollm_testutils.mock import Reply, ScriptedProvider


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"x": value}
    return value


@given(st.integers(1, 3000), st.sampled_from(["dict", "list"]))
def test_depth_is_measured_without_recursion(depth: int, kind: str) -> None:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value} if kind == "dict" else [value]
    assert nests_deeper_than(value, MAX_JSON_DEPTH) is (depth > MAX_JSON_DEPTH)


@pytest.mark.anyio
async def test_deep_tool_arguments_go_back_to_the_model_as_an_argument_error() -> None:
    @ollm.tool
    def echo(x: dict[str, Any]) -> str:
        """Echo.

        Args:
            x: Anything.
        """
        return "ran"

    deep = nested(sys.getrecursionlimit() + 100)
    provider = ScriptedProvider(Reply(tool_calls=[("echo", {"x": deep})]), Reply("recovered"))
    chat_client = client(provider, tools=[echo])
    events = [event async for event in chat_client.chat("go")]
    results = [e for e in events if isinstance(e, ollm.ToolCallResultEvent)]
    assert len(results) == 1
    assert results[0].is_error
    assert results[0].error_code == "INVALID_ARGUMENTS"
    assert f"more than {MAX_JSON_DEPTH} levels" in results[0].result
    assert isinstance(events[-1], ollm.FinishEvent)
    assert events[-1].reason == "stop"
    assert_history_valid(chat_client.conversation)
    assert ollm.Conversation.from_json(chat_client.conversation.to_json()).messages


def test_a_tool_refuses_deep_arguments_itself() -> None:
    @ollm.tool
    def take(x: dict[str, Any]) -> str:
        """Take.

        Args:
            x: Anything.
        """
        return "ok"

    with pytest.raises(ollm.ToolArgumentsError, match="nested more than"):
        take.validate({"x": nested(5000)})
    assert take.validate({"x": nested(10)})


DEEP_LINE = (
    b'{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":'
    b'{"name":"calculate","arguments":'
    + b'{"x":' * 1000
    + b"1"
    + b"}" * 1000
    + b'}}]},"done":false}\n'
)


def _routes(request: bytes) -> bytes:
    path = request.split(b" ", 2)[1]
    if path == b"/api/chat":
        return chunked(DEEP_LINE, b'{"done":true}\n')
    if path == b"/api/show":
        return ok(b'{"capabilities":["completion","tools"]}')
    return ok(b"{}")


@pytest.mark.anyio
async def test_deep_json_from_the_server_is_bad_response_in_ollm_chat() -> None:
    async with raw_server([_routes] * 20) as server:
        done = await anyio.run_process(
            [OLLM, "chat", "-m", "m", "-t", "calculate", "hi"],
            env=ollm_env(OLLAMA_HOST=server.url),
            check=False,
        )
    stderr = done.stderr.decode()
    assert done.returncode != 0
    assert "nested too deeply" in stderr
    assert "Traceback" not in stderr
    assert "RecursionError" not in stderr
