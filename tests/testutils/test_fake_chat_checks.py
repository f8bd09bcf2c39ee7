"""FakeOllamaServer's /api/chat rejects what a real server rejects, with its texts."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fake_chat_helpers import USER, chat_body, lines_of
from hypothesis import given
from hypothesis import strategies as st

from ollm_testutils.fake_ollama import FakeOllamaServer

# -- checks a real server makes ------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"model": "llama9", "messages": USER}, 404, "model 'llama9' not found"),
        ({"messages": USER}, 400, "model is required"),
        ({"model": "", "messages": USER}, 400, "model is required"),
        (
            {"model": "llama3.2", "messages": USER, "think": True},
            400,
            '"llama3.2" does not support thinking',
        ),
        (
            {"model": "llama3.2", "messages": USER, "think": "extreme"},
            400,
            'invalid think value: "extreme" '
            '(must be "high", "medium", "low", "max", true, or false)',
        ),
        (
            {"model": "llama3.2", "messages": [{"role": "user", "content": [{"type": "text"}]}]},
            400,
            "json: cannot unmarshal array into Go struct field ChatRequest.messages.content of type"
            " string",
        ),
        (
            {
                "model": "llama3.2",
                "messages": [
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [{"function": {"name": "f", "arguments": '{"a": 1}'}}],
                    }
                ],
            },
            400,
            "json: cannot unmarshal string into Go struct field ChatRequest.messages.tool_calls."
            "function.arguments of type api.ToolCallFunctionArguments",
        ),
        (
            {
                "model": "llama3.2",
                "messages": [
                    {
                        "role": "user",
                        "content": "x",
                        "images": ["data:image/png;base64,iVBORw0KGgo="],
                    }
                ],
            },
            400,
            "illegal base64 data at input byte 4",
        ),
        (
            {"model": "llama3.2", "messages": USER, "top_logprobs": 21},
            400,
            "top_logprobs must be between 0 and 20",
        ),
        (
            {"model": "llama3.2", "messages": USER, "keep_alive": "-1"},
            400,
            'time: missing unit in duration "-1"',
        ),
        (
            {"model": "llama3.2", "messages": USER, "options": {"stop": "\n"}},
            500,
            'option "stop" must be of type array',
        ),
        (
            {"model": "llama3.2", "messages": USER, "options": {"temperature": "hot"}},
            500,
            'option "temperature" must be of type float',
        ),
        (
            {"model": "llama3.2", "messages": USER, "format": "yaml"},
            500,
            'invalid format: "yaml"; expected "json" or a valid JSON Schema object',
        ),
    ],
)
def test_requests_a_real_server_rejects(
    client: httpx.Client, body: dict[str, Any], status: int, error: str
) -> None:
    response = client.post("/api/chat", json=body)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.json() == {"error": error}


def test_unknown_options_fields_and_roles_are_ignored(client: httpx.Client) -> None:
    body = chat_body(max_tokens=5, options={"num_predict": 5.0, "mirostat": 1}, tool_choice="x")
    assert client.post("/api/chat", json=body).status_code == 200


def test_missing_and_malformed_bodies(client: httpx.Client) -> None:
    missing = client.post("/api/chat")
    assert (missing.status_code, missing.json()) == (400, {"error": "missing request body"})
    bad = client.post("/api/chat", content=b"{x")
    assert bad.json() == {"error": "invalid character 'x' looking for beginning of value"}
    cut = client.post("/api/chat", content=b'{"model": "llama3.2"')
    assert cut.json() == {"error": "unexpected EOF"}
    array = client.post("/api/chat", content=b"[]")
    assert array.json() == {
        "error": "json: cannot unmarshal array into Go value of type api.ChatRequest"
    }


def test_tools_for_a_model_without_tools_name_it_canonically(
    server: FakeOllamaServer, client: httpx.Client
) -> None:
    server.add_model("gemma2", ["completion"])
    server.add_model("someone/tiny:1b", ["completion"])
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    for name, canonical in [
        ("gemma2", "registry.ollama.ai/library/gemma2:latest"),
        ("someone/tiny:1b", "registry.ollama.ai/someone/tiny:1b"),
    ]:
        response = client.post("/api/chat", json=chat_body(model=name, tools=tools))
        assert response.status_code == 400
        assert response.json() == {"error": f"{canonical} does not support tools"}
    # An empty tool list is no tools at all.
    assert client.post("/api/chat", json=chat_body(model="gemma2", tools=[])).status_code == 200


def test_embedding_models_do_not_chat(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.add_model("bert", ["embedding"])
    response = client.post("/api/chat", json=chat_body(model="bert"))
    assert (response.status_code, response.json()) == (
        400,
        {"error": '"bert" does not support chat'},
    )


def test_a_server_without_capabilities_lets_everything_through(
    server: FakeOllamaServer, client: httpx.Client
) -> None:
    server.add_model("old", None)
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert client.post("/api/chat", json=chat_body(model="old", tools=tools)).status_code == 200


def test_checks_come_before_the_script(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.script("kept")
    assert client.post("/api/chat", json=chat_body(model="nope")).status_code == 404
    assert server.remaining == 1


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = ["model", "messages", "tools", "stream", "think", "format", "options", "keep_alive"]


@given(
    body=st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=5),
    stream=st.booleans(),
)
def test_any_request_gets_an_answer_a_real_server_could_give(
    server: FakeOllamaServer, client: httpx.Client, body: dict[str, Any], stream: bool
) -> None:
    """Whatever the JSON, the server answers with its wire format, never its own failure."""
    body.setdefault("model", "llama3.2")
    body["stream"] = stream
    response = client.post("/api/chat", json=body)
    assert response.status_code in (200, 400, 404, 500)
    if response.status_code != 200:
        error = response.json()["error"]
        assert isinstance(error, str)
        assert "fake server" not in error
    else:
        lines = lines_of(response)
        assert lines[-1]["done"] is True
