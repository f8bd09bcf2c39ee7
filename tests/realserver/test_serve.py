"""ollm serve in front of the real llama.cpp server: the openai SDK's stream through it, and
a client that disconnects stopping the server's generation (its log says so)."""

from __future__ import annotations

import time

import httpx
import openai
import pytest
from llama_server import MODEL, LlamaServer

import ollm
from ollm_openai import OpenAIProvider
from ollm_serve import create_app, running

pytestmark = pytest.mark.realserver

LOG_LIMIT = 120.0


def app_for(llama_server: LlamaServer) -> object:
    registries = ollm.discover()
    registries.providers.register(
        OpenAIProvider(llama_server.base_url, model=MODEL, environ={}), replace=True
    )
    return create_app(["openai"], registries=registries)


def test_the_openai_sdk_streams_through_ollm_serve(llama_server: LlamaServer) -> None:
    with running(app_for(llama_server)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        stream = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Say yes."}],
            stream=True,
            stream_options={"include_usage": True},
            temperature=0,
            max_tokens=8,
            seed=1,
        )
        chunks = list(stream)
        client.close()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0


def test_a_client_that_disconnects_stops_the_servers_generation(
    llama_server: LlamaServer,
) -> None:
    before = llama_server.output().count("disconnected")
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Count from 1 to 500: 1, 2, 3,"}],
        "max_tokens": 900,
        "stream": True,
    }
    with running(app_for(llama_server)) as url, httpx.Client(base_url=url, timeout=120) as http:
        with http.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if '"content":"' in line and '"content":""' not in line:
                    break  # the reply has begun: go away
        # The server saw ollm serve's request go and stopped generating (its log says so).
        deadline = time.monotonic() + LOG_LIMIT
        while llama_server.output().count("disconnected") == before:
            assert time.monotonic() < deadline, llama_server.output()[-2000:]
            time.sleep(0.1)
        # It is free for the next request (it serves one at a time).
        done = http.post(
            "/v1/chat/completions",
            json={
                **body,
                "stream": False,
                "max_tokens": 4,
                "messages": [{"role": "user", "content": "Hi"}],
            },
        )
        assert done.status_code == 200, done.text
