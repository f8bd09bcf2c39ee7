"""No key or token reaches a cassette file: not from headers, URLs or bodies, not even
when the server echoes them back cut into pieces (a property over random ones)."""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ollm
from ollm_openai import OpenAIProvider
from ollm_testutils import FakeGeminiServer, FakeOpenAIServer
from ollm_testutils.cassette import Cassette
from ollm_testutils.httpserver import Connection, HttpRequest, HttpServer, Response

# Tokens start with letters nothing else in a cassette has, so a find is a leak.
token = st.text(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", min_size=6, max_size=30
).map(lambda rest: f"Zq{rest}")
SECRET_HEADERS = [
    "Authorization",
    "Proxy-Authorization",
    "X-Api-Key",
    "api-key",
    "X-Goog-Api-Key",
    "Cookie",
    "X-Auth-Token",
    "X-Session-Id",
]
# Keys of the shapes the `redact` middleware knows, as a user might paste into a prompt.
pattern_key = st.one_of(
    st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=20, max_size=40).map(
        lambda s: f"sk-{s}"
    ),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=16, max_size=16).map(
        lambda s: f"AKIA{s}"
    ),
    st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=36, max_size=36).map(
        lambda s: f"ghp_{s}"
    ),
    st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=35, max_size=35).map(
        lambda s: f"AIza{s}"
    ),
)


@st.composite
def header_value(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A credential header's value, and the secrets in it."""
    first, second = draw(token), draw(token)
    kind = draw(st.sampled_from(["bearer", "bare", "basic", "cookie"]))
    if kind == "bearer":
        return f"Bearer {first}", [first]
    if kind == "basic":
        return "Basic " + base64.b64encode(f"{first}:{second}".encode()).decode(), [first, second]
    if kind == "cookie":
        return f"session={first}; theme={second}", [first, second]
    return first, [first]


def echo(request: HttpRequest, response: Response, connection: Connection) -> None:
    """The worst upstream: it streams back every header, the target and the body, cut
    into pieces of 5 bytes, so that a secret is cut between frames."""
    body = json.dumps({"headers": request.headers, "target": request.target}).encode()
    body += request.body
    response.start_chunked(200, "application/x-ndjson")
    for n in range(0, len(body), 5):
        response.write(body[n : n + 5])
    response.end()


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    server = HttpServer(echo)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()


def stored(path: Path) -> str:
    """The cassette's text, and each reply's frames joined (a secret cut between frames
    is whole again there), base64 ones decoded."""
    text = path.read_text()
    joined = [
        "".join(
            base64.b64decode(frame["base64"]).decode("latin-1")
            if isinstance(frame, dict)
            else frame
            for frame in episode["reply"].get("frames", [])
        )
        for episode in json.loads(text)["episodes"]
    ]
    return "\n".join([text, *joined])


@given(
    headers=st.lists(
        st.tuples(st.sampled_from(SECRET_HEADERS), header_value()),
        max_size=4,
        unique_by=lambda h: h[0].lower(),
    ),
    userinfo=st.one_of(st.none(), st.tuples(token, token)),
    query=st.lists(
        st.tuples(st.sampled_from(["key", "token", "sig", "api_key", "x"]), token), max_size=3
    ),
    keys=st.lists(pattern_key, min_size=1, max_size=3),
    field=token,
)
def test_no_secret_reaches_the_cassette(
    upstream: str,
    headers: list[tuple[str, tuple[str, list[str]]]],
    userinfo: tuple[str, str] | None,
    query: list[tuple[str, str]],
    keys: list[str],
    field: str,
) -> None:
    secrets = [*keys, field]
    base = upstream
    if userinfo is not None:
        base = upstream.replace("http://", f"http://{userinfo[0]}:{userinfo[1]}@")
        secrets += userinfo
    secrets += [value for _, value in query]
    for _, (_, found) in headers:
        secrets += found
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": f"My keys: {' and '.join(keys)}."}],
        "api_key": field,
    }
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "secrets.json"
        with Cassette(path, mode="all") as cassette:
            url = cassette.url(base, wire="ollama")
            sent = httpx.post(
                f"{url}/api/chat",
                params=query,
                headers=[(name, value) for name, (value, _) in headers],
                json=body,
                timeout=10,
            )
        assert sent.status_code == 200
        # What the client got came from the upstream unscrubbed: only the file is clean.
        for key in keys:
            assert key in sent.text
        text = stored(path)
    # Not even a part of one: the end of a key cut between frames is a leak too.
    leaked = [secret for secret in secrets if secret[-max(8, len(secret) // 2) :] in text]
    assert leaked == []
    assert "[REDACTED]" in text


@pytest.mark.anyio
async def test_a_providers_key_is_not_in_the_cassette_even_when_the_server_quotes_it(
    tmp_path: Path,
) -> None:
    key = "sk-proj-" + "k" * 40
    path = tmp_path / "key.json"
    with FakeOpenAIServer(models=["gpt-test"]) as upstream, Cassette(path, mode="all") as cassette:
        upstream.api_key = "another"  # a 401 whose message quotes the key, as OpenAI's does
        provider = OpenAIProvider(cassette.url(upstream.base_url, wire="openai"), api_key=key)
        request = ollm.ProviderRequest(model="gpt-test", messages=(ollm.Message.user("hi"),))
        events = [e async for e in provider.chat_stream(request)]
    assert any(isinstance(e, ollm.ErrorEvent) for e in events)
    assert key not in path.read_text()
    assert key[:12] not in path.read_text()


def test_a_gemini_key_in_its_header_is_not_in_the_cassette(tmp_path: Path) -> None:
    path = tmp_path / "gemini.json"
    key = "AIza" + "x" * 35
    with FakeGeminiServer(api_key=key) as upstream, Cassette(path, mode="all") as cassette:
        url = cassette.url(upstream.url, wire="gemini")
        listed = httpx.get(f"{url}/v1beta/models", headers={"x-goog-api-key": key}, timeout=10)
    assert listed.status_code == 200
    assert key not in path.read_text()
