"""ollm chat --tool-strategy NAME: any installed tool-calling strategy, from the command line."""

from __future__ import annotations

import json

import pytest

from ollm_testutils import FakeOllamaServer, OllamaReply

KNOWN = "auto, native, recover, react, react-example, json-react"
EXAMPLE = "Example of a whole exchange"  # what only react-example's instructions have


def _system(server: FakeOllamaServer) -> str:
    (request,) = server.chat_requests
    messages = request.json["messages"]
    return str(messages[0]["content"]) if messages[0]["role"] == "system" else ""


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_the_worked_example_strategy_is_reachable_from_the_cli(  # type: ignore[no-untyped-def]
    run_ollm, server: FakeOllamaServer, how: str
) -> None:
    server.script(OllamaReply(["Thought: easy.\nFinal Answer: 4"]))
    flags = ["--tool-strategy", "react-example"] if how == "flag" else []
    env = {"OLLM_TOOL_STRATEGY": "react-example"} if how == "environment" else {}
    result = run_ollm("chat", "-m", "llama3.2", "-t", "calculate", *flags, "What is 2+2?", **env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "4"
    assert "tools" not in server.chat_requests[0].json  # the tools are in the instructions
    assert EXAMPLE in _system(server)


def test_react_stays_the_react_strategy(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.script(OllamaReply(["Final Answer: 4"]))
    result = run_ollm("chat", "-m", "llama3.2", "-t", "calculate", "--react", "What is 2+2?")
    assert result.returncode == 0, result.stderr
    assert "tools" not in server.chat_requests[0].json
    assert "Final Answer" in _system(server)
    assert EXAMPLE not in _system(server)


def test_the_flag_wins_over_the_environment(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    server.script(OllamaReply(["4"]))
    result = run_ollm(
        "chat", "-m", "llama3.2", "-t", "calculate", "--tool-strategy", "native", "2+2?",
        OLLM_TOOL_STRATEGY="react-example",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert [t["function"]["name"] for t in server.chat_requests[0].json["tools"]] == ["calculate"]


@pytest.mark.parametrize(
    ("flags", "env", "said"),
    [
        (["--tool-strategy", "reactt"], {}, "--tool-strategy reactt"),
        ([], {"OLLM_TOOL_STRATEGY": "reactt"}, "OLLM_TOOL_STRATEGY=reactt"),
    ],
)
def test_an_unknown_strategy_is_a_usage_error_naming_the_known_ones(  # type: ignore[no-untyped-def]
    run_ollm, server: FakeOllamaServer, flags: list[str], env: dict[str, str], said: str
) -> None:
    result = run_ollm("chat", "-m", "llama3.2", "-t", "calculate", *flags, "hi", **env)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {said}: no tool strategy is named 'reactt'.")
    assert f"Known: {KNOWN} " in result.stderr
    assert "Traceback" not in result.stderr
    assert server.chat_requests == []


def test_an_unknown_strategy_is_refused_without_tools_too(
    run_ollm, server: FakeOllamaServer
) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm("chat", "-m", "llama3.2", "--tool-strategy", "nope", "hi")
    assert result.returncode == 2
    assert "no tool strategy is named 'nope'" in result.stderr
    assert server.chat_requests == []


def test_react_and_another_strategy_together_are_refused(run_ollm) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm("chat", "-p", "echo", "--react", "--tool-strategy", "native", "hi")
    assert result.returncode == 2
    assert "not allowed with argument --react" in result.stderr


def test_ollm_plugins_lists_the_tool_strategies(run_ollm) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm("plugins")
    assert result.returncode == 0, result.stderr
    assert f"Tool strategies (ollm chat --tool-strategy NAME): {KNOWN}\n" in result.stdout


def test_react_without_ollm_react_names_the_package(run_ollm, server: FakeOllamaServer) -> None:  # type: ignore[no-untyped-def]
    result = run_ollm(
        "chat", "-m", "llama3.2", "-t", "calculate", "--react", "hi", OLLM_BLOCK_PLUGINS="react"
    )
    assert result.returncode == 2
    assert "no tool strategy is named 'react'. Install it with: pip install ollm-react." in (
        result.stderr
    )
    assert "Known: auto, native " in result.stderr
    assert server.chat_requests == []


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_model_without_tools_calls_them_through_json_react_kept_by_format(  # type: ignore[no-untyped-def]
    run_ollm, server: FakeOllamaServer, backend: str
) -> None:
    # /api/show says the model writes text but has no native tools: Ollama constrains
    # each step with `format`, so auto picks json-react.
    server.add_model("gemma3:270m", ["completion"])
    call = {
        "thought": "I need calculate.",
        "action": {"tool": "calculate", "arguments": {"expression": "17 * 23"}},
    }
    answer = {"thought": "The result is there.", "action": {"final_answer": "391"}}
    server.script(OllamaReply([json.dumps(call)]), OllamaReply([json.dumps(answer)]))
    result = run_ollm(
        "--backend", backend, "chat", "-m", "gemma3:270m", "-t", "calculate", "What is 17 * 23?"
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "391"
    assert "gemma3:270m cannot call tools natively: using the json-react strategy." in (
        result.stderr
    )
    first, second = server.chat_requests
    for request in (first, second):
        body = request.json
        assert "tools" not in body
        # The step schema: a call of calculate with its arguments, or the answer.
        branches = body["format"]["properties"]["action"]["anyOf"]
        assert branches[0]["properties"]["tool"] == {"const": "calculate"}
        assert "expression" in branches[0]["properties"]["arguments"]["properties"]
        assert branches[-1]["required"] == ["final_answer"]
    assert "Result of calculate: 391" in second.json["messages"][-1]["content"]
