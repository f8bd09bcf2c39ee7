"""What the provider sends to /api/chat: messages, tools, options, format, think, keep_alive."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

import ollm
from ollm_ollama import OllamaProvider

pytestmark = pytest.mark.anyio

AddReply = Callable[..., None]  # the `reply` fixture
RunChat = Callable[..., Awaitable[list[ollm.ProviderEvent]]]  # the `chat` fixture

HOST = "http://127.0.0.1:11434"
Chunk = Callable[..., dict[str, Any]]
Sent = Callable[[], list[dict[str, Any]]]

WEATHER = ollm.ToolSchema(
    "get_temperature",
    "Get the current temperature for a city",
    {
        "type": "object",
        "required": ["city"],
        "properties": {"city": {"type": "string", "description": "The name of the city"}},
    },
)
TIME = ollm.ToolSchema("get_time", "The time now")


async def test_the_system_prompt_is_the_first_message(
    reply: AddReply, chat: RunChat, sent: Sent, final: Chunk
) -> None:
    reply(final("ok"))
    await chat(
        messages=(ollm.Message.user("one"), ollm.Message.assistant("two")),
        system_prompt="Be terse.",
    )
    assert sent()[0]["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
    ]


async def test_no_system_prompt_sends_no_system_message(
    reply: AddReply, chat: RunChat, sent: Sent, final: Chunk
) -> None:
    reply(final("ok"))
    await chat("hi")
    body = sent()[0]
    assert body["model"] == "llama3.2"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["options"] == {}
    assert not {"tools", "format", "think", "keep_alive"} & set(body)


async def test_tools_go_as_function_schemas_with_every_keyword(
    reply: AddReply, chat: RunChat, sent: Sent, final: Chunk
) -> None:
    reply(final("ok"))
    schema = ollm.ToolSchema(
        "search",
        "Search the web",
        {
            "type": "object",
            "properties": {"q": {"type": "string", "minLength": 1, "default": "x"}},
            "required": ["q"],
            "additionalProperties": False,
        },
    )
    await chat(tools=(WEATHER, schema))
    assert sent()[0]["tools"] == [
        {"type": "function", "function": msgspec_dict(WEATHER)},
        {"type": "function", "function": msgspec_dict(schema)},
    ]


def msgspec_dict(schema: ollm.ToolSchema) -> dict[str, Any]:
    return {
        "name": schema.name,
        "description": schema.description,
        "parameters": schema.parameters,
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", ["get_temperature", "get_time"]),
        ("required", ["get_temperature", "get_time"]),
        ("get_time", ["get_time"]),
        ("no_such_tool", ["get_temperature", "get_time"]),
        ("none", None),
    ],
)
async def test_tool_choice_narrows_the_tools_ollama_sees(
    reply: AddReply,
    chat: RunChat,
    sent: Sent,
    final: Chunk,
    choice: str,
    expected: list[str] | None,
) -> None:
    """Ollama has no tool_choice (it would be ignored silently): ollm narrows the list."""
    reply(final("ok"))
    await chat(tools=(WEATHER, TIME), tool_choice=choice)
    body = sent()[0]
    assert "tool_choice" not in body
    if expected is None:
        assert "tools" not in body
    else:
        assert [t["function"]["name"] for t in body["tools"]] == expected


async def test_extra_options_pass_through_and_named_fields_win(
    reply: AddReply, chat: RunChat, sent: Sent, final: Chunk
) -> None:
    reply(final("ok"))
    options = ollm.GenerationOptions(
        temperature=0.5, extra={"min_p": 0.05, "num_gpu": 1, "temperature": 1.9}
    )
    await chat(options=options)
    assert sent()[0]["options"] == {"min_p": 0.05, "num_gpu": 1, "temperature": 0.5}


@pytest.mark.parametrize("response_format", ["json", {"type": "object", "properties": {}}])
async def test_format_is_json_or_a_schema(
    reply: AddReply,
    chat: RunChat,
    sent: Sent,
    final: Chunk,
    response_format: str | dict[str, Any],
) -> None:
    reply(final("{}"))
    await chat(response_format=response_format)
    assert sent()[0]["format"] == response_format


async def test_another_format_is_refused_before_anything_is_sent(
    ollama_mock: HTTPXMock, chat: RunChat
) -> None:
    """The server would fail at generation time with HTTP 500."""
    events = await chat(response_format="yaml")
    assert len(events) == 1
    error = events[0]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "INVALID_REQUEST"
    assert "'json' or a JSON Schema" in error.message
    assert not ollama_mock.get_requests(url=f"{HOST}/api/chat")


@pytest.mark.parametrize("think", [True, False, "high", "max"])
async def test_think_is_sent_as_given(
    reply: AddReply, chat: RunChat, sent: Sent, final: Chunk, think: bool | str
) -> None:
    reply(final("ok"))
    await chat(think=think)
    assert sent()[0]["think"] == think


async def test_keep_alive_from_the_provider_and_from_one_request(
    ollama_mock: HTTPXMock, final: Chunk
) -> None:
    for _ in range(2):
        ollama_mock.add_response(
            method="POST", url=f"{HOST}/api/chat", content=json.dumps(final()).encode()
        )
    async with OllamaProvider(HOST, keep_alive="10m", http="httpx", environ={}) as provider:
        plain = ollm.ProviderRequest("llama3.2", (ollm.Message.user("a"),))
        override = ollm.ProviderRequest(
            "llama3.2",
            (ollm.Message.user("b"),),
            options=ollm.GenerationOptions(extra={"keep_alive": "-1"}),
        )
        for request in (plain, override):
            [e async for e in provider.chat_stream(request)]
    first, second = (
        json.loads(r.content) for r in ollama_mock.get_requests(url=f"{HOST}/api/chat")
    )
    assert first["keep_alive"] == "10m"
    assert second["keep_alive"] == -1
    assert "keep_alive" not in second["options"]


async def test_a_request_stop_keeps_the_models_own_stop_strings(
    ollama_mock: HTTPXMock, reply: AddReply, chat: RunChat, sent: Sent, final: Chunk
) -> None:
    """On Ollama a request's `stop` replaces the Modelfile's; ollm merges them."""
    ollama_mock.add_response(
        method="POST",
        url=f"{HOST}/api/show",
        json={"parameters": 'num_ctx 8192\nstop "<|eot_id|>"\nstop "<|start_header_id|>"'},
    )
    reply(final("a"))
    reply(final("b"))
    options = ollm.GenerationOptions(stop=("\nUser:", "<|eot_id|>"))
    await chat(options=options)
    await chat(options=options)  # the model's stop strings are read once
    for body in sent():
        assert body["options"]["stop"] == ["<|eot_id|>", "<|start_header_id|>", "\nUser:"]
    assert len(ollama_mock.get_requests(url=f"{HOST}/api/show")) == 1


async def test_when_the_models_stop_strings_are_unknown_the_request_ones_go(
    ollama_mock: HTTPXMock, reply: AddReply, chat: RunChat, sent: Sent, final: Chunk
) -> None:
    ollama_mock.add_response(method="POST", url=f"{HOST}/api/show", status_code=500)
    reply(final("a"))
    await chat(options=ollm.GenerationOptions(stop=("END",)))
    assert sent()[0]["options"]["stop"] == ["END"]


async def test_no_stop_asks_nothing_about_the_model(
    ollama_mock: HTTPXMock, reply: AddReply, chat: RunChat, final: Chunk
) -> None:
    reply(final("a"))
    await chat(options=ollm.GenerationOptions(temperature=0.1))
    assert not ollama_mock.get_requests(url=f"{HOST}/api/show")


@pytest.mark.parametrize(
    ("options", "match"),
    [
        (ollm.GenerationOptions(temperature="hot"), "options.temperature must be a number"),  # type: ignore[arg-type]
        (ollm.GenerationOptions(max_tokens=1.5), "options.max_tokens must be an integer"),  # type: ignore[arg-type]
        (ollm.GenerationOptions(top_k=True), "options.top_k must be an integer"),
        (ollm.GenerationOptions(stop=(1, 2)), "options.stop must be a list of strings"),  # type: ignore[arg-type]
        (ollm.GenerationOptions(extra={"keep_alive": [1]}), "keep_alive"),
    ],
)
async def test_wrongly_typed_options_fail_before_sending(
    ollama_mock: HTTPXMock, chat: RunChat, options: ollm.GenerationOptions, match: str
) -> None:
    """A wrongly typed option is an HTTP 500 on the server: ollm says it first."""
    ollama_mock.add_response(method="POST", url=f"{HOST}/api/show", json={}, is_optional=True)
    events = await chat(options=options)
    assert len(events) == 1
    error = events[0]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "INVALID_REQUEST"
    assert match in error.message
    assert not ollama_mock.get_requests(url=f"{HOST}/api/chat")


async def test_a_value_json_cannot_carry_is_an_invalid_request(
    ollama_mock: HTTPXMock, chat: RunChat
) -> None:
    events = await chat(options=ollm.GenerationOptions(extra={"mirostat": object()}))
    error = events[-1]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "INVALID_REQUEST"
    assert "cannot be sent as JSON" in error.message


async def test_a_request_without_a_model_is_refused(ollama_mock: HTTPXMock, chat: RunChat) -> None:
    events = await chat(model=" ")
    error = events[-1]
    assert isinstance(error, ollm.ErrorEvent)
    assert error.code == "INVALID_REQUEST"
    assert "model=" in error.message
