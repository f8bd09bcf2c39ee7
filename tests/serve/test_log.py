"""``ollm serve --log``: each served chat goes to the conversation log as a conversation of
its own; without it (the default) nothing is logged, not even a file made."""

from __future__ import annotations

from pathlib import Path

import pytest

import ollm
from ollm.logs import LogStore
from ollm_serve import create_app
from ollm_testutils import Reply, ScriptedProvider

from .conftest import asgi_client

pytestmark = pytest.mark.anyio

CHAT = {
    "model": "mock-model",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Why is the sky blue?"},
    ],
}


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat"])
async def test_with_log_each_served_chat_is_logged_whole(
    registries: ollm.Registries,
    scripted: ScriptedProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    stream: bool,
) -> None:
    logs = tmp_path / "logs.db"
    monkeypatch.setenv("OLLM_LOGS_PATH", str(logs))
    scripted.add(Reply("Rayleigh scattering."))
    app = create_app(("scripted",), registries=registries, log=True)
    async with asgi_client(app) as http:
        answer = await http.post(path, json={**CHAT, "stream": stream})
    assert answer.status_code == 200, answer.text
    with LogStore(logs, readonly=True) as store:
        info = store.latest()
        assert info is not None
        assert (info.provider, info.model) == ("scripted", "mock-model")
        conversation = store.load(info.id)
        (response,) = store.responses(info.id)
    assert [(m.role, m.text) for m in conversation.messages] == [
        ("user", "Why is the sky blue?"),
        ("assistant", "Rayleigh scattering."),
    ]
    assert response.finish_reason == "stop"
    assert info.system == "Be brief."


async def test_without_log_nothing_is_logged(
    registries: ollm.Registries,
    scripted: ScriptedProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logs = tmp_path / "logs.db"
    monkeypatch.setenv("OLLM_LOGS_PATH", str(logs))
    scripted.add(Reply("Rayleigh scattering."))
    async with asgi_client(create_app(("scripted",), registries=registries)) as http:
        answer = await http.post("/v1/chat/completions", json=CHAT)
    assert answer.status_code == 200, answer.text
    assert not logs.exists()


async def test_a_log_that_cannot_be_written_never_fails_the_request(
    registries: ollm.Registries,
    scripted: ScriptedProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("OLLM_LOGS_PATH", str(blocked / "logs.db"))
    scripted.add(Reply("Rayleigh scattering."))
    async with asgi_client(create_app(("scripted",), registries=registries, log=True)) as http:
        answer = await http.post("/v1/chat/completions", json=CHAT)
    assert answer.status_code == 200, answer.text
    assert "Rayleigh" in answer.text
    assert "served but not logged" in caplog.text


async def test_a_reply_that_calls_the_clients_tools_is_logged_with_its_calls(
    registries: ollm.Registries,
    scripted: ScriptedProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logs = tmp_path / "logs.db"
    monkeypatch.setenv("OLLM_LOGS_PATH", str(logs))
    scripted.add(Reply(tool_calls=[("get_weather", {"city": "Oslo"})]))
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    app = create_app(("scripted",), registries=registries, log=True)
    async with asgi_client(app) as http:
        answer = await http.post("/v1/chat/completions", json={**CHAT, "tools": [tool]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["finish_reason"] == "tool_calls"
    with LogStore(logs, readonly=True) as store:
        info = store.latest()
        assert info is not None
        messages = store.load(info.id).messages
    (reply,) = [m for m in messages if m.role == "assistant"]
    assert [(c.name, c.args) for c in reply.tool_calls] == [("get_weather", {"city": "Oslo"})]
