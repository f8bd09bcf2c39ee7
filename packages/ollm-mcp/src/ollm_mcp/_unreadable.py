"""What a server sends that the SDK cannot read: a call's answer, or a stray line.

The SDK's transports parse each message with pydantic. A message they cannot read (a
banner a stdio server prints before it speaks JSON-RPC, or an answer nested deeper than
pydantic's JSON parser goes) is logged with a traceback, and over stdio it is dropped:
a call it answered waits for its timeout. Here each transport's read stream is
screened: an unreadable answer to a request becomes that request's error at once, and
any other unreadable line is given to ``on_stray`` (the session quotes the first one
in a single line). The SDK's own records of these failures, and the tracebacks of its
other records, go to the debug log, for ``--debug``.
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any

import anyio
import mcp_types
import msgspec
from mcp.shared.message import SessionMessage

__all__ = ["PARSING_FAILED", "in_session", "screened", "stray_line", "unreadable_reason"]

log = logging.getLogger(__name__)

PARSING_FAILED = "Failed to parse "
"""How the messages of the errors that stand for an unreadable answer begin (the SDK's
Streamable HTTP client words them so, and ``screened`` does the same)."""

_SDK_PARSE_FAILURES = (
    "Failed to parse JSONRPC message from server",
    "Error parsing SSE message",
    "Error parsing JSON response",
)
_SDK_LOGGERS = (
    "mcp.client.client",
    "mcp.client.session",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.shared.jsonrpc_dispatcher",
)
_LINE_CHARS = 120

Transport = AbstractAsyncContextManager[tuple[Any, Any]]


@asynccontextmanager
async def screened(
    transport: Transport, on_stray: Callable[[str], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """``transport``'s streams, with unreadable messages answered or handed to ``on_stray``."""
    async with transport as (read, write):
        yield _Screen(read, on_stray), write


class _Screen:
    """A transport's read stream that lets no unreadable message through."""

    def __init__(self, inner: Any, on_stray: Callable[[str], None]) -> None:
        self._inner = inner
        self._on_stray = on_stray

    @property
    def last_context(self) -> contextvars.Context | None:
        """The sender's context of the last message, where the transport keeps one."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            text = _input_of(item)
            if text is None:
                return item  # not a message it failed to read: the SDK's to handle
            request = _answered_request(text)
            if request is not None:
                error = mcp_types.ErrorData(
                    code=mcp_types.PARSE_ERROR, message=f"{PARSING_FAILED}the answer: {item}"
                )
                return SessionMessage(
                    mcp_types.JSONRPCError(jsonrpc="2.0", id=request, error=error)
                )
            self._on_stray(text if isinstance(text, str) else msgspec.json.encode(text).decode())

    def __aiter__(self) -> _Screen:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Screen:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def unreadable_reason(message: str) -> str:
    """Why an answer could not be read, in words, from the error that stands for it."""
    if "recursion limit exceeded" in message:
        return "nests deeper than about 200 levels, the most the MCP SDK's JSON parser reads"
    if "Invalid JSON" in message:
        return "is not valid JSON"
    return "is not a JSON-RPC message"


def stray_line(text: str) -> str:
    """A line a server should not have written, short enough to quote."""
    text = text.strip()
    if len(text) > _LINE_CHARS:
        text = text[: _LINE_CHARS - 3] + "..."
    return repr(text)


def _input_of(exc: Exception) -> str | dict[str, Any] | None:
    """What the SDK failed to read: the text, or the JSON object it held, if it says."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        value = errors()[0]["input"]
    except Exception:  # not pydantic's ValidationError after all
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, (str, dict)) else None


def _answered_request(text: str | dict[str, Any]) -> int | str | None:
    """The id of the request an unreadable message answers, if it has an answer's shape."""
    keys: set[str]
    request: object
    if isinstance(text, dict):
        keys, request = {f'"{key}"' for key in text}, text.get("id")
    else:
        keys, request = _top_level(text)
    if '"method"' in keys or not keys & {'"result"', '"error"'}:
        return None
    if isinstance(request, bool) or not isinstance(request, (int, str)):
        return None
    return request


# JSON's tokens, enough to follow the nesting without a recursive parser: strings,
# punctuation, and runs of anything else (numbers, true, false, null).
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


def _top_level(line: str) -> tuple[set[str], object]:
    """The keys (quoted) of the object ``line`` holds, and the value of its ``"id"``,
    whatever nests below: iterative, so no depth is too deep."""
    depth = 0
    keys: set[str] = set()
    found: object = None
    previous = ("", "")
    for match in _TOKENS.finditer(line):
        token = match.group()
        if depth == 1:
            if token == ":" and previous[1].startswith('"'):
                keys.add(previous[1])
            elif previous == ('"id"', ":") and token not in ("{", "["):
                try:
                    found = msgspec.json.decode(token)
                except msgspec.DecodeError:
                    found = None
        if token in ("{", "["):
            depth += 1
        elif token in ("}", "]"):
            depth -= 1
        previous = (previous[1], token)
    return keys, found


# -- the SDK's log records ----------------------------------------------------------------

_in_session: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "ollm_mcp_in_session", default=False
)


@contextmanager
def in_session() -> Iterator[None]:
    """Mark what the SDK does from here on as ollm's: the tasks it starts, and the requests
    it sends (a transport may handle them in the sender's context); their log records
    are screened."""
    _install_filter()
    token = _in_session.set(True)
    try:
        yield
    finally:
        _in_session.reset(token)


class _Screening(logging.Filter):
    """Inside an ollm session: the SDK's records of unreadable messages go to the debug
    log only (the session says it in a line of its own), and other records lose their
    traceback, which goes to the debug log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _in_session.get():
            return True
        if record.msg in _SDK_PARSE_FAILURES:
            log.debug("the MCP SDK: %s", record.getMessage(), exc_info=record.exc_info)
            return False
        if record.exc_info and record.levelno > logging.DEBUG:
            log.debug("the MCP SDK: %s", record.getMessage(), exc_info=record.exc_info)
            record.exc_info = None
            record.exc_text = None
        return True


_FILTER = _Screening()


def _install_filter() -> None:
    # On the loggers that make the records: a filter of an ancestor would not see them.
    for name in _SDK_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
