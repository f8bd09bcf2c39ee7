"""ollm_http: the HTTP layer under ollm's providers.

- ``HTTPClient`` and ``HTTPConfig``: one server, a connection pool per event loop,
  requests whose failures are ``OllmError`` with stable codes, worded for the provider
  (``ErrorContext``); redirects that never carry a secret header (``is_secret_header``)
  or a request's body to another server (``same_site``, ``RedirectRefusedError``), and
  no credentials in any message or ``repr()`` (``without_userinfo``).
- ``HTTPTransport``: the transport under it, for ``httpx.AsyncClient``: HTTP/1.1 parsed
  by llhttp (httptools), pooled connections with a limit per server, plain and TLS,
  on asyncio and trio.
- ``Reply.lines()`` (NDJSON) and ``Reply.sse()`` (Server-Sent Events), bounded in
  memory; ``LineSplitter`` and ``EventSplitter`` for bytes from elsewhere.
- ``body_reader`` (gzip and deflate decoded in bounded pieces, ``BodyDecodingError``
  for anything else), ``abort_shuts_socket``, ``drain``, ``close_response`` and
  ``failure_event``: a streamed reply read on the hot path, stopped at once by an abort,
  ended cleanly, or ended with the right event when it fails; ``check_health``.
- ``check_base_url``, ``seconds_setting``, ``affinity_setting`` and ``is_loopback``: a
  provider's address, timeouts and affinity header read from its settings, with
  messages that name the setting;
  ``option_number``, ``stop_sequences`` and ``encode_body``: a request's options checked
  and its body encoded, failing with ``InvalidRequestError``.
- ``RetryPolicy``, ``with_retries`` and ``retry_after_seconds`` for servers that say
  "not now" (HTTP 429, 503) or fail for a moment.
- ``HTTPProvider`` and ``FrameStream``: the skeleton of an HTTP provider, which keeps
  only its wire (its requests, its frames' decoding, its error wording: ``error_for``);
  ``decode_json`` (depth-safe); ``stack_setting`` and ``secret_setting``.

Nothing here is a plugin: providers import it.
"""

from ollm_http._body import BodyDecodingError
from ollm_http._client import HTTPClient, Reply
from ollm_http._config import (
    ErrorContext,
    HTTPConfig,
    Limits,
    Timeouts,
    check_header,
    is_secret_header,
    without_userinfo,
)
from ollm_http._errors import RedirectRefusedError, describe, error_from_exception, excerpt
from ollm_http._lines import EventSplitter, LineSplitter, LineTooLongError, ServerSentEvent
from ollm_http._options import encode_body, option_number, stop_sequences
from ollm_http._provider import Adjust, FrameStream, Framing, HTTPProvider, decode_json
from ollm_http._redirects import MAX_REDIRECTS, same_site
from ollm_http._retry import (
    DEFAULT_RETRY,
    NO_RETRY,
    RetryPolicy,
    is_rate_limited,
    retry_after_seconds,
    with_retries,
)
from ollm_http._settings import (
    ServerSettings,
    ServerSetup,
    Stack,
    affinity_setting,
    check_base_url,
    credentials_header,
    display_url,
    is_loopback,
    seconds_setting,
    secret_setting,
    stack_setting,
)
from ollm_http._stream import (
    BodyRead,
    abort_shuts_socket,
    body_reader,
    check_health,
    close_response,
    drain,
    failure_event,
)
from ollm_http._transport import HTTPTransport
from ollm_http._version import __version__

__all__ = [
    "DEFAULT_RETRY",
    "MAX_REDIRECTS",
    "NO_RETRY",
    "Adjust",
    "BodyDecodingError",
    "BodyRead",
    "ErrorContext",
    "EventSplitter",
    "FrameStream",
    "Framing",
    "HTTPClient",
    "HTTPConfig",
    "HTTPProvider",
    "HTTPTransport",
    "Limits",
    "LineSplitter",
    "LineTooLongError",
    "RedirectRefusedError",
    "Reply",
    "RetryPolicy",
    "ServerSentEvent",
    "ServerSettings",
    "ServerSetup",
    "Stack",
    "Timeouts",
    "__version__",
    "abort_shuts_socket",
    "affinity_setting",
    "body_reader",
    "check_base_url",
    "check_header",
    "check_health",
    "close_response",
    "credentials_header",
    "decode_json",
    "describe",
    "display_url",
    "drain",
    "encode_body",
    "error_from_exception",
    "excerpt",
    "failure_event",
    "is_loopback",
    "is_rate_limited",
    "is_secret_header",
    "option_number",
    "retry_after_seconds",
    "same_site",
    "seconds_setting",
    "secret_setting",
    "stack_setting",
    "stop_sequences",
    "with_retries",
    "without_userinfo",
]
