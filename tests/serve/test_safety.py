"""ollm serve guards itself: keys (constant time, 401 before anything goes upstream),
the bind check, CORS off unless asked, body and depth limits, the concurrency cap, and a
client that disconnects aborting the upstream request."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest
from cli_helpers import OLLM, ollm_env

import ollm
from ollm_ollama import OllamaProvider
from ollm_serve import running
from ollm_testutils import FakeOllamaServer, FunctionProvider, OllamaReply, Reply, ScriptedProvider

from .conftest import KEY, asgi_client, make_app

pytestmark = pytest.mark.anyio

CHAT = {"model": "mock-model", "messages": [{"role": "user", "content": "Hi"}]}


@pytest.mark.parametrize(
    ("path", "header"),
    [
        ("/v1/chat/completions", None),
        ("/v1/chat/completions", "Bearer wrong-key-of-twenty-chars"),
        ("/v1/chat/completions", f"Basic {KEY}"),
        ("/v1/chat/completions", f"Bearer {KEY}x"),
        ("/api/chat", f"Bearer {KEY[:-1]}"),
    ],
)
async def test_a_missing_or_wrong_key_is_401_before_anything_goes_upstream(
    registries: ollm.Registries, scripted: ScriptedProvider, path: str, header: str | None
) -> None:
    app = make_app(registries, api_keys=("another-key-of-twenty", KEY))
    headers = {"authorization": header} if header else {}
    async with asgi_client(app) as http:
        response = await http.post(path, json=CHAT, headers=headers)
        listing = await http.get("/v1/models", headers=headers)
    assert response.status_code == listing.status_code == 401
    assert "API key" in response.text
    assert scripted.requests == []


async def test_each_of_several_keys_opens(
    registries: ollm.Registries, scripted: ScriptedProvider
) -> None:
    scripted.add(Reply("one"), Reply("two"))
    app = make_app(registries, api_keys=("another-key-of-twenty", KEY))
    async with asgi_client(app) as http:
        for key in ("another-key-of-twenty", KEY):
            response = await http.post(
                "/v1/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"}
            )
            assert response.status_code == 200


async def test_cors_is_off_unless_an_origin_is_named(registries: ollm.Registries) -> None:
    origin = {"origin": "http://evil.example"}
    async with asgi_client(make_app(registries)) as http:
        response = await http.get("/v1/models", headers=origin)
        preflight = await http.options("/v1/chat/completions", headers=origin)
    assert "access-control-allow-origin" not in response.headers
    assert "access-control-allow-origin" not in preflight.headers
    app = make_app(registries, cors=("http://webui.example",))
    async with asgi_client(app) as http:
        other = await http.get("/v1/models", headers=origin)
        named = await http.get("/v1/models", headers={"origin": "http://webui.example"})
        preflight = await http.options(
            "/v1/chat/completions", headers={"origin": "http://webui.example"}
        )
    assert "access-control-allow-origin" not in other.headers
    assert named.headers["access-control-allow-origin"] == "http://webui.example"
    assert preflight.status_code == 204
    assert "authorization" in preflight.headers["access-control-allow-headers"]


async def test_a_body_too_large_is_413(
    registries: ollm.Registries, scripted: ScriptedProvider
) -> None:
    app = make_app(registries, max_body=1000)
    big = {**CHAT, "messages": [{"role": "user", "content": "x" * 2000}]}
    async with asgi_client(app) as http:
        response = await http.post("/v1/chat/completions", json=big)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"
    assert scripted.requests == []


async def test_json_nested_too_deeply_is_400(
    registries: ollm.Registries, scripted: ScriptedProvider
) -> None:
    deep = "[" * 5000 + "]" * 5000
    body = '{"model": "m", "messages": [{"role": "user", "content": "x"}], "x": ' + deep + "}"
    async with asgi_client(make_app(registries)) as http:
        response = await http.post(
            "/api/chat", content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    assert "error" in response.json()
    assert scripted.requests == []


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"not json", "not valid JSON"),
        (b"[1]", "JSON object"),
        (json.dumps({"messages": []}).encode(), "model is required"),
        (json.dumps({**CHAT, "messages": [{"role": "robot"}]}).encode(), "role must be"),
        (json.dumps({**CHAT, "tools": [{"function": {"name": "a b"}}]}).encode(), "tools[0]"),
        (json.dumps({**CHAT, "temperature": "hot"}).encode(), "temperature must be a number"),
        (json.dumps({**CHAT, "max_tokens": True}).encode(), "max_tokens must be"),
        (
            json.dumps(
                {
                    **CHAT,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "image_url", "image_url": {"url": "http://x/a.png"}}
                            ],
                        }
                    ],
                }
            ).encode(),
            "does not fetch images",
        ),
    ],
)
async def test_bad_requests_are_400_in_words(
    http: httpx.AsyncClient, scripted: ScriptedProvider, body: bytes, words: str
) -> None:
    response = await http.post("/v1/chat/completions", content=body)
    assert response.status_code == 400
    assert words in response.json()["error"]["message"]
    assert scripted.requests == []


async def test_unknown_paths_and_methods(http: httpx.AsyncClient) -> None:
    assert (await http.get("/v2/anything")).status_code == 404
    assert (await http.get("/v1/chat/completions")).status_code == 405
    assert (await http.get("/")).text == "Ollama is running"


async def test_beyond_the_concurrency_cap_is_429_with_retry_after(
    registries: ollm.Registries,
) -> None:
    started = anyio.Event()
    release = anyio.Event()
    calls: list[ollm.ProviderRequest] = []

    async def held(request: ollm.ProviderRequest) -> AsyncIterator[ollm.ProviderEvent]:
        calls.append(request)
        if len(calls) == 1:  # the first request holds its place; a second never should
            started.set()
            await release.wait()
        yield ollm.TextEvent("done")
        yield ollm.FinishEvent("stop")

    registries.providers.register(FunctionProvider(held, name="held"))
    app = make_app(registries, ("held",), max_concurrent=1)
    async with asgi_client(app) as http, anyio.create_task_group() as group:
        first: list[httpx.Response] = []

        async def occupy() -> None:
            first.append(await http.post("/v1/chat/completions", json=CHAT))

        group.start_soon(occupy)
        await started.wait()
        busy = await http.post("/api/chat", json=CHAT)
        release.set()
    assert busy.status_code == 429
    assert busy.headers["retry-after"] == "1"
    assert "busy" in busy.json()["error"]
    assert first[0].status_code == 200
    assert len(calls) == 1
    assert app.active == 0


def test_a_client_that_disconnects_aborts_the_upstream_request() -> None:
    with FakeOllamaServer() as fake:
        fake.script(OllamaReply.hanging(["first words"]))
        registries = ollm.discover(plugins=[], entry_points=[])
        registries.providers.register(OllamaProvider(fake.url, environ={}))
        app = make_app(registries, ("ollama",))
        with running(app) as url, httpx.Client(base_url=url) as http:
            body = {**CHAT, "model": "llama3.2", "stream": True}
            with http.stream("POST", "/v1/chat/completions", json=body) as response:
                for line in response.iter_lines():
                    if "first words" in line:
                        break
            # The client has gone: ollm serve closes its request to the backend.
            (request,) = fake.chat_requests
            assert request.wait(timeout=30)
            assert request.disconnected
            assert not request.completed


def serve(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [OLLM, "serve", "-p", "echo", *args],
        env=ollm_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "::", "my-host.example"])
def test_a_non_loopback_bind_without_keys_refuses_to_start(host: str) -> None:
    done = serve("--host", host, "--port", "1")
    assert done.returncode == 1
    assert f"refuses to listen on {host} without an API key" in done.stderr
    assert "--api-key" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_short_key_is_refused() -> None:
    done = serve("--host", "0.0.0.0", OLLM_SERVE_API_KEYS="short")
    assert done.returncode == 1
    assert "at least 16 characters" in done.stderr


async def test_concurrent_requests_each_get_their_own_answer(
    registries: ollm.Registries,
) -> None:
    async def answer(request: ollm.ProviderRequest) -> str:
        await anyio.sleep(0)  # let the others interleave
        return "echo:" + request.messages[-1].text

    registries.providers.register(FunctionProvider(answer, name="answering"))
    app = make_app(registries, ("answering",))
    answers: dict[int, str] = {}
    async with asgi_client(app) as http, anyio.create_task_group() as group:

        async def ask(number: int) -> None:
            body = {"model": "m", "messages": [{"role": "user", "content": str(number)}]}
            reply = await http.post("/v1/chat/completions", json=body)
            answers[number] = reply.json()["choices"][0]["message"]["content"]

        for number in range(40):
            group.start_soon(ask, number)
    assert answers == {n: f"echo:{n}" for n in range(40)}
    assert app.active == 0
