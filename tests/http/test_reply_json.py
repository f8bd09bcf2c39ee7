"""``Reply.json``: a whole reply's body decoded as JSON, as a given type if asked, from a
real socket on 127.0.0.1, on asyncio and trio."""

from __future__ import annotations

import msgspec
import pytest
from raw_http import ok, raw_server

from ollm_http import HTTPClient, HTTPConfig

pytestmark = pytest.mark.anyio


class Version(msgspec.Struct):
    version: str


class NumberedVersion(msgspec.Struct):
    version: int


async def test_the_body_is_decoded_as_json() -> None:
    body = b'{"a": [1, 2.5, "x"], "b": null, "c": {"d": true}}'
    async with raw_server([ok(body)]) as server:
        http = HTTPClient(HTTPConfig(server.url))
        reply = await http.request("GET", "/")
        got = reply.json()
        assert got == {"a": [1, 2.5, "x"], "b": None, "c": {"d": True}}
        assert type(got["a"][0]) is int
        assert reply.json() == got  # the body stays: it can be decoded again
        await http.aclose()


async def test_the_body_is_decoded_as_the_type_asked_for() -> None:
    replies = [ok(b'{"version": "0.5.1", "extra": 1}'), ok(b'{"version": "7"}')]
    async with raw_server(replies) as server:
        http = HTTPClient(HTTPConfig(server.url))
        reply = await http.request("GET", "/api/version")
        assert reply.json(Version) == Version("0.5.1")
        assert reply.json(dict[str, object]) == {"version": "0.5.1", "extra": 1}
        # Strict, as msgspec is: a string of digits is not an integer.
        reply = await http.request("GET", "/api/version")
        assert reply.json() == {"version": "7"}
        with pytest.raises(msgspec.ValidationError) as caught:
            reply.json(NumberedVersion)
        assert str(caught.value) == "Expected `int`, got `str` - at `$.version`"
        await http.aclose()


@pytest.mark.parametrize("body", [b"not json", b'{"a": ', b""])
async def test_a_body_that_is_not_json_raises_msgspecs_decode_error(body: bytes) -> None:
    async with raw_server([ok(body)]) as server:
        http = HTTPClient(HTTPConfig(server.url))
        reply = await http.request("GET", "/")
        with pytest.raises(msgspec.DecodeError):
            reply.json()
        await http.aclose()


async def test_a_streamed_reply_must_be_read_before_it_is_decoded() -> None:
    async with raw_server([ok(b"[1, 2]")]) as server:
        http = HTTPClient(HTTPConfig(server.url))
        async with http.stream("GET", "/") as reply:
            with pytest.raises(RuntimeError, match=r"call `await reply\.aread\(\)` first"):
                reply.json()
            assert await reply.aread() == b"[1, 2]"
            assert reply.json() == [1, 2]
            assert reply.json(list[int]) == [1, 2]
        await http.aclose()
