"""One upstream of a cassette: the wire's fake server, replaying, and recording through.

Every request reaches the fake server's ``playback`` first. Its canonical form (secrets
scrubbed, volatile fields numbered) is the key: a recorded episode with that key is
replayed frame by frame, one HTTP chunk a frame, as it arrived; a request with no
recording is a miss (replaying), or goes on to the upstream (recording), whose reply is
passed to the client piece by piece as it streams and kept with the same cuts.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ollm_testutils.cassette._format import Episode, HttpReply, key_of, normalise_volatile
from ollm_testutils.cassette._secrets import strip_userinfo
from ollm_testutils.cassette._wires import Wire, get_wire
from ollm_testutils.httpserver import Connection, HttpRequest, Response

if TYPE_CHECKING:
    import httpx

    from ollm_testutils.cassette._cassette import Cassette

__all__ = ["Route"]

log = logging.getLogger(__name__)

# Not passed on to the upstream: they describe this hop, not the request.
_HOP = frozenset(
    {"host", "connection", "keep-alive", "content-length", "transfer-encoding", "accept-encoding"}
)
# The only reply headers stored and replayed (an allowlist: a cookie never gets in).
_KEPT_REPLY_HEADERS = ("content-type", "retry-after")
# Not one a client retries (500, 502-504 are): a miss is reported once, at once.
_MISS_STATUS = 501


class Route:
    """The wire's fake server on 127.0.0.1, standing in for ``upstream``."""

    def __init__(self, cassette: Cassette, wire_name: str, upstream: str) -> None:
        self.cassette = cassette
        self.wire: Wire = get_wire(wire_name)
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, not {strip_userinfo(upstream)!r}")
        cassette.scrubber.learn_url(upstream)
        self.upstream = upstream.rstrip("/")
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._client: httpx.Client | None = None
        self.server = self.wire.server()
        self.server.playback = self._play
        self.server.start()
        self.url = f"{self.server.url}{parts.path.rstrip('/')}"

    def stop(self) -> None:
        self.server.stop()
        if self._client is not None:
            self._client.close()

    # -- the key -----------------------------------------------------------------------

    def canonical(self, request: HttpRequest) -> dict[str, Any]:
        """The request as its key sees it."""
        scrubber = self.cassette.scrubber
        scrubber.learn_headers(request.headers)
        body: Any
        try:
            body = json.loads(request.body) if request.body else None
        except ValueError:
            body = request.body.decode("utf-8", "replace")
        body = normalise_volatile(scrubber.json(body), self.wire.volatile)
        return {
            "wire": self.wire.name,
            "method": request.method,
            "path": scrubber.text(request.path),
            "query": scrubber.query(request.query),
            "body": body,
        }

    # -- serving -----------------------------------------------------------------------

    def _play(self, request: HttpRequest, response: Response, connection: Connection) -> bool:
        canonical = self.canonical(request)
        episode = self.cassette.take(key_of(canonical))
        if episode is not None and episode.reply is not None:
            _replay(episode.reply, response)
        elif not self.cassette.recording:
            message = self.cassette.miss(canonical)
            body = self.wire.error_body(_MISS_STATUS, message)
            response.send(_MISS_STATUS, body, "application/json")
        else:
            self._record(request, canonical, response)
        return True

    def _record(self, request: HttpRequest, canonical: dict[str, Any], response: Response) -> None:
        import httpx  # only to record: a replay never reaches a real server

        if self._client is None:
            timeout = httpx.Timeout(30.0, read=None)
            self._client = httpx.Client(timeout=timeout, follow_redirects=False)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        headers["accept-encoding"] = "identity"
        url = self._origin + request.target
        frames: list[bytes] = []
        try:
            with self._client.stream(
                request.method, url, headers=headers, content=request.body
            ) as upstream:
                found = upstream.headers
                kept = {k: found[k] for k in _KEPT_REPLY_HEADERS if k in found}
                chunked = "chunked" in upstream.headers.get("transfer-encoding", "").lower()
                reply = HttpReply(upstream.status_code, kept, frames, chunked)
                pieces = (
                    upstream.iter_bytes()
                    if upstream.headers.get("content-encoding")
                    else upstream.iter_raw()
                )
                if chunked:
                    _pass_through(reply, pieces, response)
                else:
                    frames.append(b"".join(pieces))
                    _replay(reply, response)
        except httpx.HTTPError as exc:
            if frames:
                reply.cut = True
                response.abort()
            else:
                where = strip_userinfo(self.upstream)
                message = f"ollm cassette: recording, the upstream {where} failed: {exc}"
                message = self.cassette.scrubber.text(message)
                response.send(502, self.wire.error_body(502, message), "application/json")
                return
        self.cassette.add(Episode(canonical, reply))


def _pass_through(reply: HttpReply, pieces: Any, response: Response) -> None:
    """Each piece to the client as it comes, and into the reply's frames."""
    client_here = response.start_chunked(reply.status, _content_type(reply))
    for piece in pieces:
        if not piece:
            continue
        reply.frames.append(piece)
        if client_here:
            client_here = response.write(piece)
    if client_here:
        response.end()


def _replay(reply: HttpReply, response: Response) -> None:
    """A recorded reply, one HTTP chunk a frame when it was streamed."""
    extra = [(k, v) for k, v in reply.headers.items() if k != "content-type"]
    if not reply.chunked:
        body = b"".join(reply.frames)
        response.send(reply.status, body, reply.headers.get("content-type"), extra)
        return
    if not response.start_chunked(reply.status, _content_type(reply)):
        return
    for frame in reply.frames:
        if not response.write(frame):
            return
    if reply.cut:
        response.abort()
    else:
        response.end()


def _content_type(reply: HttpReply) -> str:
    return reply.headers.get("content-type", "application/octet-stream")
