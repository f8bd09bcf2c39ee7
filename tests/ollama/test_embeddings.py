"""Embeddings through /api/embed: batches of 100, order kept, errors that name everything."""

from __future__ import annotations

import json

import httpx
import pytest
from pytest_httpx import HTTPXMock

import ollm
from ollm_ollama import OllamaProvider

pytestmark = pytest.mark.anyio

HOST = "http://127.0.0.1:11434"


def _echo_vectors(request: httpx.Request) -> httpx.Response:
    """Each text "t<n>" becomes the vector [n, 0.5]: the order can be checked."""
    body = json.loads(request.content)
    vectors = [[float(text[1:]), 0.5] for text in body["input"]]
    return httpx.Response(
        200,
        json={
            "model": body["model"],
            "embeddings": vectors,
            "total_duration": 10,
            "load_duration": 1,
            "prompt_eval_count": len(vectors),
        },
    )


async def test_a_few_texts_go_in_one_request(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    httpx_mock.add_callback(_echo_vectors, method="POST", url=f"{HOST}/api/embed")
    result = await provider.embed("all-minilm", ["t1", "t2"])
    assert result.model == "all-minilm"
    assert result.vectors == [[1.0, 0.5], [2.0, 0.5]]
    assert result.usage == ollm.Usage(
        prompt_tokens=2, total_tokens=2, total_duration_ns=10, load_duration_ns=1
    )
    assert json.loads(httpx_mock.get_requests()[0].content) == {
        "model": "all-minilm",
        "input": ["t1", "t2"],
    }


async def test_many_texts_are_batched_and_keep_their_order(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    httpx_mock.add_callback(_echo_vectors, method="POST", url=f"{HOST}/api/embed", is_reusable=True)
    texts = [f"t{i}" for i in range(250)]
    result = await provider.embed("all-minilm", texts)
    assert [v[0] for v in result.vectors] == [float(i) for i in range(250)]
    sizes = [len(json.loads(r.content)["input"]) for r in httpx_mock.get_requests()]
    assert sizes == [100, 100, 50]
    assert result.usage is not None
    assert result.usage.prompt_tokens == 250
    assert result.usage.total_duration_ns == 30


async def test_exactly_a_hundred_is_one_request(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    httpx_mock.add_callback(_echo_vectors, method="POST", url=f"{HOST}/api/embed")
    result = await provider.embed("all-minilm", [f"t{i}" for i in range(100)])
    assert len(result.vectors) == 100


async def test_dimensions_and_truncate_are_sent(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    httpx_mock.add_callback(_echo_vectors, method="POST", url=f"{HOST}/api/embed")
    await provider.embed("all-minilm", ["t1"], dimensions=256, truncate=False)
    body = json.loads(httpx_mock.get_requests()[0].content)
    assert (body["dimensions"], body["truncate"]) == (256, False)


async def test_no_texts_send_nothing(httpx_mock: HTTPXMock, provider: OllamaProvider) -> None:
    result = await provider.embed("all-minilm", [])
    assert result.vectors == []
    assert not httpx_mock.get_requests()


async def test_an_error_names_provider_model_and_reason(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    httpx_mock.add_response(
        method="POST",
        url=f"{HOST}/api/embed",
        status_code=404,
        json={"error": 'model "nomic" not found, try pulling it first'},
    )
    with pytest.raises(ollm.ModelNotFoundError) as caught:
        await provider.embed("nomic", ["a", "b"])
    message = caught.value.message
    assert message.startswith("Provider 'ollama' could not embed 2 texts with model 'nomic'")
    assert "try pulling it first" in message
    assert "ollm models pull nomic" in message
    assert (caught.value.provider, caught.value.model) == ("ollama", "nomic")


async def test_a_failing_later_batch_says_which(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    httpx_mock.add_callback(_echo_vectors, method="POST", url=f"{HOST}/api/embed")
    httpx_mock.add_response(
        method="POST",
        url=f"{HOST}/api/embed",
        status_code=400,
        json={"error": "the input length exceeds the context length"},
    )
    with pytest.raises(ollm.InvalidRequestError, match="texts 101 and on of 150") as caught:
        await provider.embed("all-minilm", [f"t{i}" for i in range(150)], truncate=False)
    assert "exceeds the context length" in caught.value.message


async def test_a_wrong_number_of_vectors_is_a_bad_response(
    httpx_mock: HTTPXMock, provider: OllamaProvider
) -> None:
    httpx_mock.add_response(method="POST", url=f"{HOST}/api/embed", json={"embeddings": [[0.1]]})
    with pytest.raises(ollm.BadResponseError, match="1 vectors for 2 texts"):
        await provider.embed("all-minilm", ["a", "b"])


async def test_one_string_instead_of_a_list_is_refused_in_words(provider: OllamaProvider) -> None:
    # The same error, in the same words, from every provider (tests/integration).
    with pytest.raises(ollm.InvalidRequestError, match="not one string: wrap it in a list"):
        await provider.embed("all-minilm", "just one")
