"""FakeOllamaServer's /api/chat over real HTTP: the default reply and scripted replies."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fake_chat_helpers import CALL_ID, chat_body, lines_of

from ollm_testutils.fake_ollama import FakeOllamaServer, OllamaReply, OllamaToolCall

# -- the default reply -------------------------------------------------------------------


def test_default_reply_streams_chunks_then_a_final_chunk_with_metrics(
    client: httpx.Client,
) -> None:
    response = client.post("/api/chat", json=chat_body())
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.headers["transfer-encoding"] == "chunked"
    chunks = lines_of(response)
    assert len(chunks) > 3
    *middle, final = chunks
    for chunk in middle:
        assert chunk["done"] is False
        assert chunk["model"] == "llama3.2"
        assert chunk["message"]["role"] == "assistant"
        assert "done_reason" not in chunk
        assert "eval_count" not in chunk
        assert chunk["created_at"].endswith("Z")
    assert "".join(c["message"]["content"] for c in middle) == "Hello! How can I help you today?"
    assert final["done"] is True
    assert final["done_reason"] == "stop"
    assert final["message"] == {"role": "assistant", "content": ""}
    for metric in ("total_duration", "load_duration", "prompt_eval_count", "eval_count"):
        assert isinstance(final[metric], int)
        assert final[metric] > 0
    assert final["eval_count"] == len(middle)


def test_stream_false_joins_the_reply_like_write_chat_response(client: httpx.Client) -> None:
    streamed = lines_of(client.post("/api/chat", json=chat_body()))
    whole = client.post("/api/chat", json=chat_body(stream=False))
    assert whole.headers["content-type"] == "application/json; charset=utf-8"
    body = whole.json()
    assert body["message"]["content"] == "".join(c["message"]["content"] for c in streamed)
    assert body["done"] is True
    assert body["done_reason"] == "stop"
    assert not whole.text.endswith("\n")


def test_model_echoes_the_name_as_sent(client: httpx.Client) -> None:
    chunks = lines_of(client.post("/api/chat", json=chat_body(model="llama3.2:latest")))
    assert {c["model"] for c in chunks} == {"llama3.2:latest"}


def test_a_thinking_model_thinks_by_default_and_not_when_told(
    server: FakeOllamaServer, client: httpx.Client
) -> None:
    server.add_model("qwen3", ["completion", "tools", "thinking"])
    thinking = lines_of(client.post("/api/chat", json=chat_body(model="qwen3")))
    assert any(c["message"].get("thinking") for c in thinking)
    assert all(c["message"]["content"] == "" for c in thinking if c["message"].get("thinking"))
    plain = lines_of(client.post("/api/chat", json=chat_body(model="qwen3", think=False)))
    assert not any("thinking" in c["message"] for c in plain)


def test_empty_messages_load_and_keep_alive_zero_unloads(client: httpx.Client) -> None:
    load = client.post("/api/chat", json={"model": "llama3.2", "messages": []})
    assert load.headers["content-type"] == "application/json; charset=utf-8"
    assert not load.text.endswith("\n")
    assert load.json()["done_reason"] == "load"
    assert load.json()["done"] is True
    assert [m["name"] for m in client.get("/api/ps").json()["models"]] == ["llama3.2:latest"]
    unload = client.post("/api/chat", json={"model": "llama3.2", "keep_alive": 0})
    assert unload.json()["done_reason"] == "unload"
    assert client.get("/api/ps").json()["models"] == []


# -- scripted replies ------------------------------------------------------------------


def test_scripted_replies_are_played_in_order_then_the_default(
    server: FakeOllamaServer, client: httpx.Client
) -> None:
    server.script(OllamaReply(["Bon", "jour"]), "Second")
    assert server.remaining == 2
    first = lines_of(client.post("/api/chat", json=chat_body()))
    assert [c["message"]["content"] for c in first] == ["Bon", "jour", ""]
    second = client.post("/api/chat", json=chat_body(stream=False)).json()
    assert second["message"]["content"] == "Second"
    third = client.post("/api/chat", json=chat_body(stream=False)).json()
    assert third["message"]["content"] == "Hello! How can I help you today?"
    assert server.remaining == 0


def test_thinking_chunks_have_empty_content(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.script(OllamaReply("Answer", thinking=["Let me ", "think"]))
    chunks = lines_of(client.post("/api/chat", json=chat_body()))
    assert [c["message"] for c in chunks[:2]] == [
        {"role": "assistant", "content": "", "thinking": "Let me "},
        {"role": "assistant", "content": "", "thinking": "think"},
    ]
    assert chunks[2]["message"] == {"role": "assistant", "content": "Answer"}


def test_tool_calls_on_a_done_false_chunk_with_ids_and_indexes(
    server: FakeOllamaServer, client: httpx.Client
) -> None:
    server.script(OllamaReply(tool_calls=[("get_weather", {"city": "Paris"}), ("get_time", {})]))
    *middle, final = lines_of(client.post("/api/chat", json=chat_body()))
    assert len(middle) == 1
    assert middle[0]["done"] is False
    calls = middle[0]["message"]["tool_calls"]
    assert [c["function"] for c in calls] == [
        {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}},
        {"index": 1, "name": "get_time", "arguments": {}},
    ]
    assert all(CALL_ID.match(c["id"]) for c in calls)
    assert calls[0]["id"] != calls[1]["id"]
    assert "tool_calls" not in final["message"]
    assert final["done_reason"] == "stop"


def test_tool_calls_on_the_final_chunk(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.script(OllamaReply("Checking.", tool_calls=[("f", {"a": 1})], tool_calls_on="final"))
    chunks = lines_of(client.post("/api/chat", json=chat_body()))
    assert [c["done"] for c in chunks] == [False, True]
    assert chunks[1]["message"]["tool_calls"][0]["function"]["name"] == "f"
    assert chunks[1]["done_reason"] == "stop"


def test_each_tool_call_on_its_own_chunk(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.script(OllamaReply(tool_calls=[("a", {}), ("b", {})], tool_calls_on="each"))
    chunks = lines_of(client.post("/api/chat", json=chat_body()))
    assert [
        [t["function"]["name"] for t in c["message"].get("tool_calls", [])] for c in chunks
    ] == [
        ["a"],
        ["b"],
        [],
    ]


def test_tool_calls_like_older_servers(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.script(
        OllamaReply(
            tool_calls=[
                OllamaToolCall("old", {"x": 1}, id=None, index=None),
                OllamaToolCall("fixed", '{"y": 2}', id="call_fixed01", index=0),
            ]
        )
    )
    calls = lines_of(client.post("/api/chat", json=chat_body()))[0]["message"]["tool_calls"]
    assert calls[0] == {"function": {"name": "old", "arguments": {"x": 1}}}
    assert calls[1] == {
        "id": "call_fixed01",
        "function": {"index": 0, "name": "fixed", "arguments": '{"y": 2}'},
    }


def test_stream_false_joins_thinking_text_and_tool_calls(
    server: FakeOllamaServer, client: httpx.Client
) -> None:
    server.script(
        OllamaReply(
            ["Let me ", "check."],
            thinking=["hm", "m"],
            tool_calls=[("f", {})],
            final_text=" Done",
            done_reason="length",
        )
    )
    body = client.post("/api/chat", json=chat_body(stream=False)).json()
    assert body["message"]["content"] == "Let me check. Done"
    assert body["message"]["thinking"] == "hmm"
    assert body["message"]["tool_calls"][0]["function"]["name"] == "f"
    assert body["done_reason"] == "length"


def test_final_text_and_explicit_metrics(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.script(OllamaReply("a", final_text="b", metrics={"eval_count": 7, "load_duration": 0}))
    final = lines_of(client.post("/api/chat", json=chat_body()))[-1]
    assert final["message"]["content"] == "b"
    assert final["eval_count"] == 7
    assert "load_duration" not in final
    assert "total_duration" not in final


def test_reply_function_computes_replies_from_the_request(
    server: FakeOllamaServer, client: httpx.Client
) -> None:
    def reply(body: dict[str, Any]) -> OllamaReply | str | None:
        text = body["messages"][-1]["content"]
        return None if text == "default" else f"you said {text}"

    server.reply_with(reply)
    said = client.post("/api/chat", json=chat_body(stream=False)).json()
    assert said["message"]["content"] == "you said hi"
    body = chat_body(stream=False, messages=[{"role": "user", "content": "default"}])
    default = client.post("/api/chat", json=body).json()
    assert default["message"]["content"].startswith("Hello!")


def test_default_reply_can_be_replaced(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.default_reply = OllamaReply("always")
    for _ in range(2):
        assert (
            client.post("/api/chat", json=chat_body(stream=False)).json()["message"]["content"]
            == "always"
        )


def test_bulk_reply_streams_every_chunk(server: FakeOllamaServer, client: httpx.Client) -> None:
    server.default_reply = OllamaReply.streamed(20_000, "tok ")
    for _ in range(2):  # the second answer comes from the pre-built body
        chunks = lines_of(client.post("/api/chat", json=chat_body()))
        assert len(chunks) == 20_001
        assert chunks[-1]["done"] is True
        assert chunks[-1]["eval_count"] == 20_000
        assert {c["message"]["content"] for c in chunks[:-1]} == {"tok "}


def test_a_failing_reply_function_is_reported(
    server: FakeOllamaServer, client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(body: dict[str, Any]) -> str:
        raise KeyError("oops")

    server.reply_with(broken)
    response = client.post("/api/chat", json=chat_body())
    assert response.status_code == 500
    assert response.json() == {"error": "fake server failure: KeyError: 'oops'"}
    assert "the fake server failed on POST /api/chat" in caplog.text
