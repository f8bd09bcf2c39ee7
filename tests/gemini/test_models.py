"""Models, capabilities, embeddings, token counts and health; the CLI on the Gemini provider."""

from __future__ import annotations

import json
import subprocess

import pytest
from cli_helpers import OLLM, ollm_env

import ollm
from ollm_gemini import GeminiProvider
from ollm_testutils import FakeGeminiServer, GeminiReply

from .conftest import KEY, MODEL, chat_events, client_for, provider_for, request_for

pytestmark = pytest.mark.anyio


async def test_the_list_reads_every_page(server: FakeGeminiServer) -> None:
    server.models.update({f"gemini-extra-{n}": 32768 for n in range(5)})
    server.page_size = 2
    async with provider_for(server) as provider:
        models = await provider.list_models()
    names = [m.name for m in models]
    assert names == sorted(server.models)
    pages = [r for r in server.requests if r.path == "/v1beta/models"]
    assert len(pages) == 5  # 9 models, 2 a page
    assert "pageToken=page-2" in pages[1].query


async def test_show_and_capabilities(server: FakeGeminiServer, provider: GeminiProvider) -> None:
    info = await provider.show_model(MODEL)
    assert info.capabilities is not None
    assert info.capabilities.tools
    assert info.capabilities.context_window == 1_048_576
    assert info.details["displayName"] == "Gemini 2.5 Flash"
    embedder = await provider.model_capabilities("gemini-embedding-001")
    assert embedder.embedding
    assert not embedder.completion
    with pytest.raises(ollm.ModelNotFoundError):
        await provider.show_model("gemini-0")


async def test_capabilities_of_an_unreachable_api_are_unknown_not_an_error() -> None:
    async with GeminiProvider(KEY, base_url="http://127.0.0.1:9", environ={}) as provider:
        capabilities = await provider.model_capabilities(MODEL)
    assert capabilities == ollm.ModelCapabilities()


async def test_embeddings_keep_the_order_in_batches_of_100(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    texts = [f"text {n}" for n in range(150)]
    result = await provider.embed("gemini-embedding-001", texts, dimensions=4)
    assert len(result.vectors) == 150
    assert all(len(v) == 4 for v in result.vectors)
    again = await provider.embed("gemini-embedding-001", texts[120:121], dimensions=4)
    assert again.vectors[0] == result.vectors[120]
    batches = [r.json for r in server.requests if r.path.endswith(":batchEmbedContents")]
    assert [len(b["requests"]) for b in batches] == [100, 50, 1]
    assert batches[0]["requests"][0] == {
        "model": "models/gemini-embedding-001",
        "content": {"parts": [{"text": "text 0"}]},
        "outputDimensionality": 4,
    }


async def test_token_counts_are_estimates_far_from_the_window_and_exact_near_it(
    server: FakeGeminiServer, provider: GeminiProvider
) -> None:
    request = request_for("word " * 400)
    estimate = await provider.count_tokens(request)
    assert not [r for r in server.requests if r.path.endswith(":countTokens")]
    server.models[MODEL] = 600
    provider._cards.clear()
    exact = await provider.count_tokens(request)
    counted = [r for r in server.requests if r.path.endswith(":countTokens")]
    assert len(counted) == 1
    inner = counted[0].json["generateContentRequest"]
    assert inner["model"] == f"models/{MODEL}"
    assert inner["contents"][0]["parts"][0]["text"].startswith("word word")
    assert exact == await provider.exact_tokens(request)
    assert exact != estimate


async def test_the_window_from_the_api_limits_the_chat(server: FakeGeminiServer) -> None:
    server.models[MODEL] = 100
    async with provider_for(server) as provider:
        events = await chat_events(client_for(provider), "word " * 400)
    errors = [e for e in events if isinstance(e, ollm.ErrorEvent)]
    assert errors
    assert errors[0].code == "TOKEN_LIMIT"
    assert not server.generate_requests


async def test_health(server: FakeGeminiServer, provider: GeminiProvider) -> None:
    status = await provider.health()
    assert status.ok
    assert status.provider == "gemini"
    async with GeminiProvider("wrong", base_url=server.url, environ={}) as bad:
        failed = await bad.health()
    assert not failed.ok
    assert failed.error_code == "AUTH_FAILED"


def cli(server: FakeGeminiServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = ollm_env(GEMINI_API_KEY=KEY, OLLM_GEMINI_BASE_URL=server.url)
    return subprocess.run(
        [OLLM, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
        check=False,
    )


def test_the_cli_chats_and_lists_models_with_gemini(server: FakeGeminiServer) -> None:
    server.script(GeminiReply(["Hello ", "from Gemini."]))
    chat = cli(server, "chat", "-p", "gemini", "hi")
    assert chat.returncode == 0, chat.stderr
    assert "Hello from Gemini." in chat.stdout
    listing = cli(server, "models", "list", "-p", "gemini", "--json")
    assert listing.returncode == 0, listing.stderr
    names = [m["name"] for m in json.loads(listing.stdout)]
    assert MODEL in names


def test_the_cli_reports_a_block_as_json_and_fails(server: FakeGeminiServer) -> None:
    server.script(GeminiReply(block_reason="SAFETY"))
    result = cli(server, "chat", "-p", "gemini", "--json", "hi")
    assert result.returncode != 0
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[-2]["type"] == "error"
    assert events[-2]["code"] == "CONTENT_BLOCKED"
    assert events[-1]["type"] == "finish"
