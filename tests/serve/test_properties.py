"""Properties of ollm serve over any request body: bad input gets a 4xx in the wire's own
error shape (never a 500, never a traceback), and a valid conversation reaches the backend
with every message, in order."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

import ollm
from ollm_serve import create_app
from ollm_testutils import Reply, ScriptedProvider

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
FIELDS = st.sampled_from(
    [
        "model",
        "messages",
        "tools",
        "tool_choice",
        "response_format",
        "stream",
        "stream_options",
        "n",
        "max_tokens",
        "stop",
        "seed",
        "temperature",
        "top_p",
        "options",
        "format",
        "think",
        "input",
    ]
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool", "developer", "x"])},
    optional={"content": JSON, "tool_calls": JSON, "tool_call_id": JSON, "images": JSON},
)
BODY = st.dictionaries(FIELDS, JSON, max_size=6) | st.fixed_dictionaries(
    {"model": st.just("mock-model"), "messages": st.lists(MESSAGE | JSON, max_size=4)},
    optional=dict.fromkeys(("tools", "tool_choice", "response_format", "stop", "options"), JSON),
)
PATHS = st.sampled_from(
    ["/v1/chat/completions", "/api/chat", "/v1/embeddings", "/api/embed", "/api/show"]
)


def app_and_provider() -> tuple[Any, ScriptedProvider]:
    provider = ScriptedProvider(
        Reply("ok"),
        name="scripted",
        repeat_last=True,
        embedding_dimensions=2,
        models=["mock-model"],
    )
    registries = ollm.Registries()
    registries.providers.register(provider)
    return create_app(["scripted"], registries=registries), provider


async def post(app: Any, path: str, body: object) -> httpx.Response:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://s"
    ) as http:
        return await http.post(path, content=json.dumps(body))


@settings(max_examples=150, deadline=None)
@given(path=PATHS, body=BODY)
def test_any_body_gets_an_answer_or_a_4xx_in_words(path: str, body: dict[str, Any]) -> None:
    app, _ = app_and_provider()
    response = anyio.run(post, app, path, body)
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        message = error if path.startswith("/api/") else error["message"]
        assert isinstance(message, str)
        assert message
        assert "Traceback" not in message


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)


@settings(max_examples=100, deadline=None)
@given(
    turns=st.lists(st.tuples(st.sampled_from(["user", "assistant"]), TEXT), min_size=1, max_size=6),
    path=st.sampled_from(["/v1/chat/completions", "/api/chat"]),
)
def test_a_conversation_reaches_the_backend_whole_and_in_order(
    turns: list[tuple[str, str]], path: str
) -> None:
    turns = [*turns, ("user", "last")]
    app, provider = app_and_provider()
    body = {
        "model": "mock-model",
        "stream": False,
        "messages": [{"role": r, "content": t} for r, t in turns],
    }
    response = anyio.run(post, app, path, body)
    assert response.status_code == 200, response.text
    (sent,) = provider.requests
    assert [(m.role, m.text) for m in sent.messages] == turns
