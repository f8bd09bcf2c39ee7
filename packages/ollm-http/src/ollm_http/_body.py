"""A reply's body as the server meant it: decoded (gzip, deflate), bounded, from any transport.

httpx asks for ``gzip, deflate``; a server (or a proxy) may compress even a stream that
asked for ``identity``. The body is decoded here, in pieces of at most 64 KiB, with a
checkpoint between pieces (other tasks run, a cancel scope or an abort ends it), and a
body that inflates more than ``Limits.max_ratio`` to one past its first MiB is refused,
as zip-bomb defences do. Any other encoding is refused in words: raw compressed bytes
are never handed on as if they were the body.

An identity body stays the transport's own stream, with no layer on top (the hot path),
and a body already in memory (``httpx.MockTransport``, a response already read) is
given from memory.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable

import anyio.lowlevel
import httpx

from ollm_http._config import Limits

__all__ = ["BodyDecodingError", "BodyRead", "body_reader"]

BodyRead = Callable[[], Awaitable[bytes]]
"""The next block of a body; raises ``StopAsyncIteration`` at its end."""

PIECE = 64 * 1024
"""The most decoded bytes one read gives."""
FREE = 1024 * 1024
"""Decoded bytes allowed before the ratio to the compressed bytes is checked."""
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BodyDecodingError(httpx.DecodingError):
    """A body ollm cannot or will not decode: its message says why, and what to do."""


def body_reader(response: httpx.Response, *, limits: Limits | None = None) -> BodyRead:
    """The next read of the body, decoded (raises ``StopAsyncIteration`` at its end).

    An identity body is the transport's own stream, with no layer of httpx's on top:
    the bytes as they came, and the connection stays this stream's until the
    response is closed. A gzip or deflate body is decoded in pieces of at most 64 KiB
    (``limits.max_ratio`` bounds how much it may inflate); a body already in memory is
    given from there. ``BodyDecodingError`` (an ``httpx.DecodingError``, which
    ``error_from_exception`` makes ``BAD_RESPONSE``) for any other encoding.
    """
    coding = _coding(response.headers)
    stream = response.stream
    if response.is_stream_consumed:
        return _from_memory(response)
    if not isinstance(stream, httpx.AsyncByteStream):  # a synchronous body: httpx's way
        return response.aiter_bytes().__anext__
    reads = stream.__aiter__().__anext__
    if coding is None:
        return reads
    return _Inflater(reads, coding, (limits or Limits()).max_ratio).read


def _coding(headers: httpx.Headers) -> str | None:
    """The body's one compression (``None`` for none); refuses what cannot be decoded."""
    codings = [
        coding.strip().lower()
        for value in headers.get_list("content-encoding")
        for coding in value.split(",")
    ]
    codings = [coding for coding in codings if coding not in ("", "identity")]
    if not codings:
        return None
    if len(codings) > 1 or codings[0] not in _DECODERS:
        named = ", ".join(codings)
        raise BodyDecodingError(
            f"it is compressed as {named!r}, which ollm does not read (it asks for "
            "gzip or deflate, once). If a proxy between them compresses replies, have it "
            "send gzip, deflate or no compression"
        )
    return codings[0]


def _from_memory(response: httpx.Response) -> BodyRead:
    """A body that was read already: httpx decoded it (with the encoding checked above)."""
    content = response.content  # httpx.ResponseNotRead if read away raw, as httpx says
    given = False

    async def read() -> bytes:
        nonlocal given
        if given or not content:
            raise StopAsyncIteration
        given = True
        return content

    return read


class _Inflater:
    """Compressed blocks in, decoded pieces out, each at most ``PIECE`` bytes."""

    __slots__ = ("_coding", "_decoder", "_ended", "_fed", "_made", "_ratio", "_read")

    def __init__(self, read: BodyRead, coding: str, ratio: int) -> None:
        self._read = read
        self._coding = coding
        self._decoder = zlib.decompressobj(_DECODERS[coding])
        self._ratio = ratio
        self._fed = 0  # compressed bytes received
        self._made = 0  # decoded bytes given
        self._ended = False

    async def read(self) -> bytes:
        """The next decoded piece; ``StopAsyncIteration`` at the body's end."""
        while True:
            # Between pieces: a bomb in one block must not hold the event loop, nor
            # keep a cancel scope or an abort waiting.
            await anyio.lowlevel.checkpoint()
            data = self._decoder.unconsumed_tail
            if not data:
                if self._ended:
                    raise StopAsyncIteration
                try:
                    data = await self._read()
                except StopAsyncIteration:
                    self._ended = True
                    data = b""
                self._fed += len(data)
            # After the compressed data's end, the rest of the body is read and dropped
            # (zlib keeps it aside), so the connection ends cleanly.
            piece = self._decompress(data) if data else self._decoder.flush()
            if piece:
                self._made += len(piece)
                self._check_ratio()
                return piece

    def _decompress(self, data: bytes) -> bytes:
        try:
            return self._decoder.decompress(data, PIECE)
        except zlib.error as exc:
            if self._coding == "deflate" and self._made == 0 and self._fed == len(data):
                # "deflate" is often raw deflate, without zlib's header (httpx reads both).
                self._decoder = zlib.decompressobj(-zlib.MAX_WBITS)
                self._coding = "raw deflate"
                return self._decompress(data)
            raise BodyDecodingError(
                f"its {self._coding} data is corrupt (zlib: {exc}). Try again; if it keeps "
                "happening, check the server and any proxy between them"
            ) from None

    def _check_ratio(self) -> None:
        made = self._made
        if made <= FREE:
            return
        used = self._fed - len(self._decoder.unconsumed_tail)
        if made > self._ratio * used:
            raise BodyDecodingError(
                f"its {self._coding} data inflates to more than {self._ratio} times its size "
                f"(a compression bomb?): ollm stopped after {made // 1024} KiB decoded from "
                f"{used} bytes. If its replies really are that compressible, raise "
                "Limits.max_ratio"
            )
