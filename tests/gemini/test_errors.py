"""The Gemini API's failures: a typed error with the next step, never a traceback or a hang."""

from __future__ import annotations

import anyio
import pytest

import ollm
from ollm_gemini import GeminiConfig, GeminiProvider
from ollm_http import RetryPolicy
from ollm_testutils import FakeGeminiServer, GeminiReply

from .conftest import KEY, chat_events, client_for, error_of, provider_for, text_of

pytestmark = pytest.mark.anyio


async def first_error(provider: GeminiProvider) -> ollm.ErrorEvent:
    return error_of(await chat_events(client_for(provider), "hi"))


async def test_a_wrong_key_names_the_variable_it_came_from(server: FakeGeminiServer) -> None:
    provider = GeminiProvider(base_url=server.url, environ={"GEMINI_API_KEY": "nope"})
    async with provider:
        error = await first_error(provider)
    assert error.code == "AUTH_FAILED"
    assert "API key not valid" in error.message
    assert "GEMINI_API_KEY" in error.message


async def test_google_api_key_is_read_too_and_named_when_wrong(server: FakeGeminiServer) -> None:
    provider = GeminiProvider(base_url=server.url, environ={"GOOGLE_API_KEY": "nope"})
    async with provider:
        error = await first_error(provider)
    assert "GOOGLE_API_KEY" in error.message
    good = GeminiProvider(base_url=server.url, environ={"GOOGLE_API_KEY": KEY})
    async with good:
        assert text_of(await chat_events(client_for(good), "hi"))


async def test_no_key_says_where_to_get_one(server: FakeGeminiServer) -> None:
    async with GeminiProvider(base_url=server.url, environ={}) as provider:
        error = await first_error(provider)
    assert error.code == "AUTH_FAILED"
    assert "No API key was sent: set GEMINI_API_KEY" in error.message


async def test_without_a_key_googles_api_is_not_even_asked() -> None:
    async with GeminiProvider(environ={}) as provider:
        error = await first_error(provider)
        status = await provider.health()
    assert error.code == "AUTH_FAILED"
    assert "GEMINI_API_KEY" in error.message
    assert "aistudio.google.com/apikey" in error.message
    assert status.error_code == "AUTH_FAILED"


async def test_an_unknown_model_lists_the_models_that_can_chat(server: FakeGeminiServer) -> None:
    async with provider_for(server, model="gemini-9") as provider:
        error = await first_error(provider)
    assert error.code == "MODEL_NOT_FOUND"
    assert "'gemini-9'" in error.message
    assert "gemini-2.5-flash" in error.message
    assert "gemini-embedding-001" not in error.message  # it cannot chat


async def test_rate_limits_wait_the_retry_info_delay_then_succeed(server: FakeGeminiServer) -> None:
    limited = GeminiReply.failure(429, "Quota exceeded.", "RESOURCE_EXHAUSTED", retry_delay="0.05s")
    server.script(limited, "Fine now.")
    retry = RetryPolicy(attempts=3, backoff=0.01, max_wait=5)
    async with provider_for(server, retry=retry) as provider:
        events = await chat_events(client_for(provider), "hi")
    assert text_of(events) == "Fine now."
    assert len(server.generate_requests) == 2


async def test_rate_limits_that_last_are_rate_limited_with_the_delay(
    server: FakeGeminiServer,
) -> None:
    limited = GeminiReply.failure(429, "Quota exceeded.", "RESOURCE_EXHAUSTED", retry_delay="0.01s")
    server.script(limited, limited)
    retry = RetryPolicy(attempts=2, backoff=0.01, max_wait=5)
    async with provider_for(server, retry=retry) as provider:
        error = await first_error(provider)
    assert error.code == "RATE_LIMITED"
    assert "Quota exceeded" in error.message
    assert len(server.generate_requests) == 2


async def test_a_delay_longer_than_the_policy_allows_gives_up_at_once(
    server: FakeGeminiServer,
) -> None:
    server.script(GeminiReply.failure(429, "Slow down.", "RESOURCE_EXHAUSTED", retry_delay="600s"))
    retry = RetryPolicy(attempts=3, backoff=0.01, max_wait=5)
    async with provider_for(server, retry=retry) as provider:
        with anyio.fail_after(10):
            error = await first_error(provider)
    assert error.code == "RATE_LIMITED"
    assert len(server.generate_requests) == 1


async def test_an_overloaded_api_is_tried_again_then_provider_error(
    server: FakeGeminiServer,
) -> None:
    overloaded = GeminiReply.failure(503, "The model is overloaded.", "UNAVAILABLE")
    server.script(overloaded, "Recovered.")
    retry = RetryPolicy(attempts=2, backoff=0.01, max_wait=5)
    async with provider_for(server, retry=retry) as provider:
        assert text_of(await chat_events(client_for(provider), "hi")) == "Recovered."
        server.script(overloaded, overloaded)
        error = await first_error(provider)
    assert error.code == "PROVIDER_ERROR"
    assert "overloaded" in error.message


async def test_invalid_argument_names_the_field(server: FakeGeminiServer) -> None:
    server.script(
        GeminiReply.failure(
            400,
            "Invalid value at 'generation_config.temperature'",
            "INVALID_ARGUMENT",
            fields={"generation_config.temperature": "must be between 0 and 2"},
        )
    )
    async with provider_for(server) as provider:
        error = await first_error(provider)
    assert error.code == "INVALID_REQUEST"
    assert "generation_config.temperature: must be between 0 and 2" in error.message


async def test_a_token_count_past_the_limit_is_context_exceeded(server: FakeGeminiServer) -> None:
    server.script(
        GeminiReply.failure(
            400,
            "The input token count (1200000) exceeds the maximum number of tokens allowed "
            "(1048576).",
            "INVALID_ARGUMENT",
        )
    )
    async with provider_for(server) as provider:
        error = await first_error(provider)
    assert error.code == "CONTEXT_EXCEEDED"
    assert "(1200000 tokens, for a window of 1048576)" in error.message


async def test_permission_denied_says_what_to_check(server: FakeGeminiServer) -> None:
    server.script(GeminiReply.failure(403, "Permission denied.", "PERMISSION_DENIED"))
    async with provider_for(server) as provider:
        error = await first_error(provider)
    assert error.code == "AUTH_FAILED"
    assert "Generative Language API is enabled" in error.message


async def test_an_error_body_that_is_not_googles_is_quoted(server: FakeGeminiServer) -> None:
    server.script(GeminiReply(status=502, error={"oops": "gateway"}))
    async with provider_for(server) as provider:
        error = await first_error(provider)
    assert error.code == "PROVIDER_ERROR"
    assert "gateway" in error.message


async def test_a_message_of_several_lines_is_quoted_as_one(server: FakeGeminiServer) -> None:
    dump = "Request contains an invalid argument:\n  * tools[0]: bad schema\n  * more"
    server.script(GeminiReply.failure(400, dump, "INVALID_ARGUMENT"))
    async with provider_for(server) as provider:
        error = await first_error(provider)
    assert "\n" not in error.message
    assert "tools[0]: bad schema" in error.message  # the header line says less


async def test_the_history_survives_a_failure_and_the_next_chat_works(
    server: FakeGeminiServer,
) -> None:
    server.script("First.", GeminiReply.failure(500, "Internal error.", "INTERNAL"))
    async with provider_for(server) as provider:
        client = client_for(provider)
        await chat_events(client, "one")
        error = error_of(await chat_events(client, "two"))
        assert error.code == "PROVIDER_ERROR"
        server.script("Third.")
        assert text_of(await chat_events(client, "three")) == "Third."
    texts = [m.text for m in client.conversation.messages]
    assert texts[:2] == ["one", "First."]
    assert texts[-1] == "Third."


async def test_nothing_listening_is_connection_failed_naming_the_setting() -> None:
    async with GeminiProvider(KEY, base_url="http://127.0.0.1:9", environ={}) as provider:
        error = await first_error(provider)
    assert error.code == "CONNECTION_FAILED"
    assert "OLLM_GEMINI_BASE_URL" in error.message


@pytest.mark.parametrize(
    ("environ", "needle"),
    [
        ({"OLLM_GEMINI_BASE_URL": "ftp://x"}, "OLLM_GEMINI_BASE_URL"),
        ({"OLLM_GEMINI_BASE_URL": "http://h:99999"}, "port"),
        ({"OLLM_GEMINI_BASE_URL": "http://[zz]"}, "(OLLM_GEMINI_BASE_URL) is not a valid address"),
        ({"OLLM_GEMINI_API_VERSION": "v2"}, "OLLM_GEMINI_API_VERSION"),
        ({"OLLM_GEMINI_TIMEOUT": "soon"}, "OLLM_GEMINI_TIMEOUT"),
        ({"OLLM_GEMINI_HTTP": "curl"}, "OLLM_GEMINI_HTTP"),
    ],
)
def test_bad_settings_are_refused_naming_the_variable(environ: dict[str, str], needle: str) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        GeminiConfig.resolve(environ=environ)
    assert needle in caught.value.message


@pytest.mark.parametrize("model", ["gemini 2", "../secrets", "x?key=1", "a#b"])
async def test_a_model_name_that_would_change_the_url_is_refused(
    server: FakeGeminiServer, model: str
) -> None:
    async with provider_for(server, model=model) as provider:
        error = await first_error(provider)
    assert error.code == "INVALID_REQUEST"
    assert not server.requests
