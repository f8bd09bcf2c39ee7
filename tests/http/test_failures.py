"""ollm_http against servers that misbehave: each failure the old transport had.

Every test talks to a real socket on 127.0.0.1 (``raw_server``), on asyncio and trio.
"""

from __future__ import annotations

import anyio
import pytest
from raw_http import CLOSE, HANG, chunked, ok, raw_server
from runtime_helpers import settle

import ollm
from ollm_http import ErrorContext, HTTPClient, HTTPConfig, Limits, Timeouts

pytestmark = pytest.mark.anyio

CONTEXT = ErrorContext(provider="Test", code_name="test", url_setting="TEST_HOST")


def client(url: str, **kwargs: object) -> HTTPClient:
    return HTTPClient(HTTPConfig(url, context=CONTEXT, **kwargs))  # type: ignore[arg-type]


async def test_a_signed_chunk_size_is_a_bad_response_not_a_hang() -> None:
    bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-6\r\nabcdef\r\n0\r\n\r\n"
    async with raw_server([bad]) as server:
        http = client(server.url)
        with anyio.fail_after(30):  # a hang detector: the bug looped forever
            with pytest.raises(ollm.BadResponseError, match="not valid HTTP") as caught:
                await http.request("POST", "/chat", json={})
        assert "TEST_HOST" in str(caught.value)
        await http.aclose()


async def test_a_post_that_fails_on_a_reused_connection_is_never_sent_twice() -> None:
    async with raw_server([ok(), CLOSE]) as server:
        http = client(server.url)
        await http.request("POST", "/first", json={})
        with pytest.raises(ollm.ConnectionFailedError, match="closed the connection"):
            await http.request("POST", "/second", json={})
        assert server.paths() == ["/first", "/second"]  # once, not twice
        await http.aclose()


async def test_a_get_on_a_connection_the_server_dropped_is_retried_on_a_new_one() -> None:
    async with raw_server([ok(b"one"), CLOSE, ok(b"two")]) as server:
        http = client(server.url)
        assert (await http.request("GET", "/a")).content == b"one"
        assert (await http.request("GET", "/b")).content == b"two"
        assert server.paths() == ["/a", "/b", "/b"]
        await http.aclose()


async def test_an_idle_connection_closed_by_the_server_is_not_used() -> None:
    async with raw_server([(ok(b"one"), CLOSE), ok(b"two")]) as server:
        http = client(server.url)
        await http.request("POST", "/a", json={})
        await settle(lambda: server.open_now == 0)  # closed: on loopback its FIN is here
        assert (await http.request("POST", "/b", json={})).content == b"two"
        assert server.paths() == ["/a", "/b"]
        assert server.connections == 2
        await http.aclose()


@pytest.mark.parametrize("value", ["key\r\nContent-Length: 0", "key\n", "a\0b"])
async def test_line_breaks_in_a_header_are_refused_before_sending(value: str) -> None:
    async with raw_server([ok()]) as server:
        with pytest.raises(ollm.InvalidRequestError, match="X-Api-Key"):
            client(server.url, headers={"X-Api-Key": value})
        http = client(server.url)
        with pytest.raises(ollm.InvalidRequestError) as refused:
            await http.request("GET", "/", headers={"X-Other": value})
        assert refused.value.message == (
            "The HTTP header 'X-Other' has a line break or NUL character in its value, which"
            " would corrupt the request. Remove it from the headers you configured (an API key"
            " or extra header copied with its newline, for example)."
        )
        assert refused.value.provider == "test"  # the provider it was meant for
        assert server.requests == []
        await http.aclose()


async def test_an_http_1_0_reply_is_not_kept_alive() -> None:
    reply = b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\none"
    async with raw_server([reply, ok(b"two")]) as server:
        http = client(server.url, timeouts=Timeouts(read=30))
        assert (await http.request("POST", "/a", json={})).content == b"one"
        assert (await http.request("POST", "/b", json={})).content == b"two"
        assert server.connections == 2
        await http.aclose()


async def test_connection_close_is_honoured_and_read_to_close_bodies_end_at_close() -> None:
    to_close = (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close", CLOSE)
    async with raw_server([to_close, ok(b"next")]) as server:
        http = client(server.url)
        assert (await http.request("GET", "/a")).content == b"until close"
        assert (await http.request("GET", "/b")).content == b"next"
        assert server.connections == 2
        await http.aclose()


async def test_obs_fold_headers_are_unfolded() -> None:
    folded = b"HTTP/1.1 200 OK\r\nX-Note: one\r\n two\r\nContent-Length: 2\r\n\r\nhi"
    async with raw_server([folded]) as server:
        http = client(server.url)
        reply = await http.request("GET", "/")
        assert reply.content == b"hi"
        assert reply.headers["x-note"] == "one two"
        await http.aclose()


async def test_an_informational_reply_before_the_final_one_is_skipped() -> None:
    early = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"final")
    async with raw_server([early]) as server:
        http = client(server.url)
        assert (await http.request("POST", "/", json={})).content == b"final"
        await http.aclose()


async def test_a_body_cut_short_is_an_interrupted_stream() -> None:
    short = (b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"partial"', CLOSE)
    async with raw_server([short]) as server:
        http = client(server.url)
        got: list[bytes] = []

        async def read() -> None:
            async with http.stream("POST", "/", json={}) as reply:
                got.extend([line async for line in reply.lines()])

        with pytest.raises(ollm.StreamInterruptedError) as caught:
            await read()
        assert caught.value.message == (
            f"The connection to Test at {server.url} broke before the reply was complete"
            " (RemoteProtocolError: peer closed connection without sending complete message"
            " body). Try again; if it keeps happening, check the server's log."
        )
        assert got == []
        await http.aclose()


async def test_nothing_listening_names_the_setting() -> None:
    async with raw_server([]) as server:
        port = server.port
    http = client(f"http://127.0.0.1:{port}")
    with pytest.raises(ollm.ConnectionFailedError, match="TEST_HOST"):
        await http.request("GET", "/")
    await http.aclose()


async def test_a_silent_server_times_out_naming_the_phase() -> None:
    async with raw_server([HANG]) as server:
        http = client(server.url, timeouts=Timeouts(read=0.2))
        with pytest.raises(ollm.RequestTimeoutError, match=r"sent nothing for 0\.2 s"):
            await http.request("GET", "/")
        await http.aclose()


async def test_the_connection_limit_makes_requests_wait_not_fail() -> None:
    answers = [ok(b"%d" % i) for i in range(40)]
    async with raw_server(answers) as server:
        http = client(server.url, limits=Limits(max_connections=3))
        results: list[bytes] = []

        async def one() -> None:
            async with http.stream("GET", "/") as reply:
                await anyio.sleep(0.01)  # hold the connection while others wait
                results.append(await reply.aread())

        async with anyio.create_task_group() as group:
            for _ in range(40):
                group.start_soon(one)
        assert len(results) == 40
        assert server.most_open <= 3
        await http.aclose()


async def test_one_large_chunk_arrives_whole() -> None:
    big = bytes(range(256)) * (16 * 1024 * 4)  # 16 MiB in one chunk
    async with raw_server([chunked(big)]) as server:
        http = client(server.url)
        reply = await http.request("GET", "/")
        assert reply.content == big
        await http.aclose()


async def test_credentials_in_the_url_become_basic_auth_and_leave_the_url() -> None:
    async with raw_server([ok()]) as server:
        http = client(f"http://alice:s%40cret@127.0.0.1:{server.port}")
        assert "alice" not in http.base_url
        await http.request("GET", "/")
        # base64("alice:s@cret")
        assert b"Authorization: Basic YWxpY2U6c0BjcmV0" in server.requests[0]
        await http.aclose()


async def test_an_authorization_header_given_wins_over_credentials_in_the_url() -> None:
    async with raw_server([ok(), ok()]) as server:
        for name in ("Authorization", "authorization"):
            http = client(
                f"http://alice:secret@127.0.0.1:{server.port}", headers={name: "Bearer t0k"}
            )
            await http.request("GET", "/")
            await http.aclose()
        for request in server.requests:
            headers = request.lower()
            assert headers.count(b"authorization:") == 1
            assert b"authorization: bearer t0k" in headers


async def test_closing_the_client_closes_its_kept_alive_connections() -> None:
    async with raw_server([ok(), ok()]) as server:
        http = client(server.url)
        await http.request("GET", "/")
        assert server.open_now == 1  # kept alive
        await http.aclose()
        await settle(lambda: server.open_now == 0)
        await http.request("GET", "/")  # a closed client opens a new pool when asked
        await http.aclose()
        assert server.connections == 2


async def test_a_socks_proxy_without_socksio_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1")
    monkeypatch.setitem(__import__("sys").modules, "socksio", None)
    http = client("http://example.invalid:8000")
    with pytest.raises(ollm.InvalidRequestError, match=r"httpx\[socks\]"):
        await http.request("GET", "/")
    await http.aclose()


async def test_a_reply_left_early_closes_its_connection_and_frees_the_slot() -> None:
    answers = [chunked(b"a" * 300_000, b"b" * 300_000), ok(b"after")]
    async with raw_server(answers) as server:
        http = client(server.url, limits=Limits(max_connections=1))
        async with http.stream("GET", "/") as reply:
            async for _block in reply.blocks():
                break
        with anyio.fail_after(30):  # the slot is free again, or this waits forever
            assert (await http.request("GET", "/")).content == b"after"
        assert server.connections == 2
        await http.aclose()
