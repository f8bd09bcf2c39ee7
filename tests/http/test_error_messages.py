"""The words of each connection failure: its class (so its code), its message, and what it names.

``error_from_exception`` is driven with the exceptions httpx and ollm's transport raise;
each message is compared whole, because its words (the phase, the seconds, the setting
to change, the next step) are what a user reads and acts on.
"""

from __future__ import annotations

import socket
import ssl

import httpx
import pytest

import ollm
from ollm_http import ErrorContext, Timeouts, check_header, describe, error_from_exception

URL = "http://127.0.0.1:11434"
FULL = ErrorContext(
    provider="Ollama",
    code_name="ollama",
    url_setting="OLLAMA_HOST",
    start_hint="Start it with: ollama serve",
    timeout_setting="OLLAMA_TIMEOUT",
    connect_timeout_setting="OLLAMA_CONNECT_TIMEOUT",
)
BARE = ErrorContext(provider="Test", code_name="test")

CERT_FAILURE = "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate"
SOCKS_MESSAGE = (
    f"A SOCKS proxy is set for {URL} (ALL_PROXY or HTTPS_PROXY), and SOCKS needs an extra "
    "package: pip install 'httpx[socks]'. Or unset the proxy variable."
)


def caused(exc: BaseException, cause: BaseException) -> BaseException:
    """``exc`` with ``cause`` as its ``__cause__`` only (no ``__context__``)."""
    exc.__cause__ = cause
    return exc


def error(
    exc: BaseException,
    context: ErrorContext = FULL,
    *,
    timeouts: Timeouts | None = None,
    streaming: bool | None = None,
) -> ollm.OllmError:
    extra = {} if streaming is None else {"streaming": streaming}
    made = error_from_exception(
        exc, url=URL, context=context, timeouts=timeouts, model="llama3", **extra
    )
    # Every error names the provider and the model, whatever its kind.
    assert made.provider == context.code_name
    assert made.model == "llama3"
    return made


CASES: list[tuple[str, BaseException, ErrorContext, Timeouts | None, type, str]] = [
    (
        "certificate",
        caused(httpx.ConnectError("handshake"), ssl.SSLCertVerificationError(1, CERT_FAILURE)),
        FULL,
        None,
        ollm.TLSError,
        f"The certificate could not be verified for Ollama at {URL} (SSLCertVerificationError: "
        f"{CERT_FAILURE}). If the server uses a private certificate authority, point "
        "SSL_CERT_FILE at its certificate (or pass verify= with the CA bundle's path).",
    ),
    (
        "handshake",
        caused(httpx.ConnectError("handshake"), ssl.SSLError(1, "[SSL] wrong version number")),
        FULL,
        None,
        ollm.TLSError,
        f"The TLS handshake failed for Ollama at {URL} (SSLError: [SSL] wrong version number). "
        "Check that the address uses https only if the server speaks TLS there.",
    ),
    (
        "connect timeout, with its setting",
        httpx.ConnectTimeout("slow"),
        FULL,
        Timeouts(connect=2.5),
        ollm.RequestTimeoutError,
        f"Connecting to Ollama at {URL} took longer than 2.5 s. Check that the server is up "
        "and reachable or raise OLLAMA_CONNECT_TIMEOUT.",
    ),
    (
        "connect timeout, default seconds, no setting",
        httpx.ConnectTimeout("slow"),
        BARE,
        None,
        ollm.RequestTimeoutError,
        f"Connecting to Test at {URL} took longer than 10 s. Check that the server is up "
        "and reachable.",
    ),
    (
        "read timeout, with its setting",
        httpx.ReadTimeout("silent"),
        FULL,
        Timeouts(read=45),
        ollm.RequestTimeoutError,
        f"Ollama at {URL} sent nothing for 45 s. Raise the timeout (OLLAMA_TIMEOUT).",
    ),
    (
        "read timeout, default seconds, no setting",
        httpx.ReadTimeout("silent"),
        BARE,
        None,
        ollm.RequestTimeoutError,
        f"Test at {URL} sent nothing for 300 s. Raise the read timeout.",
    ),
    (
        "read timeout, the provider's own hint wins",
        httpx.ReadTimeout("silent"),
        ErrorContext(
            provider="Test",
            code_name="test",
            timeout_setting="TEST_TIMEOUT",
            read_timeout_hint="give it more time with --timeout",
        ),
        Timeouts(read=0.5),
        ollm.RequestTimeoutError,
        f"Test at {URL} sent nothing for 0.5 s. Give it more time with --timeout.",
    ),
    (
        "pool timeout",
        httpx.PoolTimeout("no connection was free"),
        FULL,
        None,
        ollm.RequestTimeoutError,
        f"Every connection to Ollama at {URL} stayed busy for too long (PoolTimeout: no "
        "connection was free). Lower the number of requests at once, or raise the "
        "connection limit.",
    ),
    (
        "write timeout, with the setting",
        httpx.WriteTimeout("sending took too long"),
        FULL,
        None,
        ollm.RequestTimeoutError,
        f"A request to Ollama at {URL} timed out (WriteTimeout: sending took too long). "
        "Raise OLLAMA_TIMEOUT.",
    ),
    (
        "write timeout, no setting",
        httpx.WriteTimeout("sending took too long"),
        BARE,
        None,
        ollm.RequestTimeoutError,
        f"A request to Test at {URL} timed out (WriteTimeout: sending took too long).",
    ),
    (
        "proxy",
        httpx.ProxyError("407 Proxy Authentication Required"),
        FULL,
        None,
        ollm.ConnectionFailedError,
        f"The proxy between ollm and Ollama at {URL} failed (ProxyError: 407 Proxy "
        "Authentication Required). Check the HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and "
        "NO_PROXY variables.",
    ),
    (
        "socks, raised as is",
        ImportError("Using SOCKS proxy, but the 'socksio' package is not installed."),
        FULL,
        None,
        ollm.InvalidRequestError,
        SOCKS_MESSAGE,
    ),
    (
        "socks, any import error raised as is",
        ImportError("No module named 'something_else'"),
        FULL,
        None,
        ollm.InvalidRequestError,
        SOCKS_MESSAGE,
    ),
    (
        "socks, under a connect error",
        caused(
            httpx.ConnectError("proxy"),
            ImportError("Using SOCKS proxy, but the 'socksio' package is not installed."),
        ),
        FULL,
        None,
        ollm.InvalidRequestError,
        SOCKS_MESSAGE,
    ),
    (
        "a connect error that only mentions socksio is not the SOCKS error",
        httpx.ConnectError("socksio.example refused the connection"),
        BARE,
        None,
        ollm.ConnectionFailedError,
        f"Test is not running at {URL}. Start it, or check the address.",
    ),
    (
        "unknown host, from the resolver's exception",
        caused(
            httpx.ConnectError("resolving failed"),
            socket.gaierror(-4, "Non-recoverable failure in name resolution"),
        ),
        FULL,
        None,
        ollm.ConnectionFailedError,
        f"Cannot find the host of {URL} (ConnectError: resolving failed). Check OLLAMA_HOST.",
    ),
    (
        "unknown host, from the message alone",
        httpx.ConnectError("[Errno -2] Name or service not known"),
        BARE,
        None,
        ollm.ConnectionFailedError,
        f"Cannot find the host of {URL} (ConnectError: [Errno -2] Name or service not known). "
        "Check the server's address.",
    ),
    (
        "refused, with the provider's hint",
        httpx.ConnectError("OSError: All connection attempts failed"),
        FULL,
        None,
        ollm.ConnectionFailedError,
        f"Ollama is not running at {URL}. Start it with: ollama serve",
    ),
    (
        "refused, naming the address setting",
        httpx.ConnectError("OSError: All connection attempts failed"),
        ErrorContext(provider="Test", code_name="test", url_setting="TEST_HOST"),
        None,
        ollm.ConnectionFailedError,
        f"Test is not running at {URL}. Start it, or check TEST_HOST.",
    ),
    (
        "refused, no setting",
        httpx.ConnectError("OSError: All connection attempts failed"),
        BARE,
        None,
        ollm.ConnectionFailedError,
        f"Test is not running at {URL}. Start it, or check the address.",
    ),
    (
        "unsupported scheme",
        httpx.UnsupportedProtocol("Request URL has an unsupported protocol 'ftp://'."),
        FULL,
        None,
        ollm.InvalidRequestError,
        f"The address {URL} is not usable for Ollama (UnsupportedProtocol: Request URL has an "
        "unsupported protocol 'ftp://'.). Check OLLAMA_HOST.",
    ),
    (
        "invalid URL, no setting",
        httpx.InvalidURL("Invalid port: 'x'"),
        BARE,
        None,
        ollm.InvalidRequestError,
        f"The address {URL} is not usable for Test (InvalidURL: Invalid port: 'x'). Check the "
        "server's address.",
    ),
    (
        "redirect loop",
        httpx.TooManyRedirects("Exceeded maximum allowed redirects."),
        FULL,
        None,
        ollm.BadResponseError,
        f"Ollama at {URL} redirected too many times (TooManyRedirects: Exceeded maximum "
        "allowed redirects.). Check OLLAMA_HOST.",
    ),
    (
        "closed before answering",
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        FULL,
        None,
        ollm.ConnectionFailedError,
        f"Ollama at {URL} closed the connection without answering (RemoteProtocolError: "
        "Server disconnected without sending a response.). Check that it is the right server "
        "and look at its log. Check OLLAMA_HOST.",
    ),
    (
        "a body that cannot be decoded",
        httpx.DecodingError("incorrect header check"),
        FULL,
        None,
        ollm.BadResponseError,
        f"Ollama at {URL} sent a reply ollm cannot read: its compressed data is corrupt "
        "(DecodingError: incorrect header check). Try again; if it keeps happening, check the "
        "server and any proxy between them.",
    ),
    (
        "anything else",
        httpx.LocalProtocolError("Illegal header value"),
        FULL,
        None,
        ollm.ProviderError,
        f"Talking to Ollama at {URL} failed: LocalProtocolError: Illegal header value. Try "
        "again; if it keeps happening, check the server.",
    ),
]


@pytest.mark.parametrize(
    ("exc", "context", "timeouts", "kind", "message"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_each_failure_has_its_kind_and_its_exact_message(
    exc: BaseException,
    context: ErrorContext,
    timeouts: Timeouts | None,
    kind: type,
    message: str,
) -> None:
    made = error(exc, context, timeouts=timeouts)
    assert type(made) is kind
    assert made.message == message


@pytest.mark.parametrize(
    "exc",
    [httpx.ReadError("connection reset"), httpx.WriteError("broken pipe")],
    ids=["read", "write"],
)
def test_a_break_is_interrupted_only_when_part_of_the_reply_was_given(
    exc: BaseException,
) -> None:
    kind = type(exc).__name__
    broken = error(exc, streaming=True)
    assert type(broken) is ollm.StreamInterruptedError
    assert broken.code == "STREAM_INTERRUPTED"
    text = str(exc)
    assert broken.message == (
        f"The connection to Ollama at {URL} broke before the reply was complete ({kind}: "
        f"{text}). Try again; if it keeps happening, check the server's log."
    )
    # By default nothing was given yet: the server closed without answering.
    for unanswered in (error(exc), error(exc, streaming=False)):
        assert type(unanswered) is ollm.ConnectionFailedError
        assert unanswered.message == (
            f"Ollama at {URL} closed the connection without answering ({kind}: {text}). "
            "Check that it is the right server and look at its log. Check OLLAMA_HOST."
        )


def test_a_tls_failure_after_the_reply_began_is_a_break_not_a_handshake() -> None:
    exc = caused(httpx.ReadError("SSLError: bad record mac"), ssl.SSLError(1, "bad record mac"))
    broken = error(exc, streaming=True)
    assert type(broken) is ollm.StreamInterruptedError
    assert broken.message == (
        f"The connection to Ollama at {URL} broke before the reply was complete (ReadError: "
        "SSLError: bad record mac). Try again; if it keeps happening, check the server's log."
    )
    assert type(error(exc)) is ollm.TLSError


def test_codes_are_the_stable_ones() -> None:
    assert error(httpx.ConnectTimeout("slow")).code == "TIMEOUT"
    assert error(httpx.ConnectError("refused")).code == "CONNECTION_FAILED"
    assert error(httpx.TooManyRedirects("loop")).code == "BAD_RESPONSE"
    assert error(httpx.InvalidURL("bad")).code == "INVALID_REQUEST"
    assert error(RuntimeError("odd")).code == "PROVIDER_ERROR"
    assert error(caused(httpx.ConnectError("x"), ssl.SSLError(1, "bad record"))).code == "TLS_ERROR"


def test_an_ollm_error_passes_through_unchanged() -> None:
    original = ollm.BadResponseError("already worded", provider="ollama", model="llama3")
    assert error(original) is original


def test_the_tls_error_is_found_as_context_or_as_cause_and_a_cycle_ends() -> None:
    def raised_inside() -> BaseException:
        try:
            try:
                raise ssl.SSLError(1, "[SSL] bad")
            except ssl.SSLError:
                raise httpx.ConnectError("handshake") from None
        except httpx.ConnectError as exc:
            return exc

    # `from None` hides the cause but keeps the context: the TLS failure is still found.
    assert type(error(raised_inside())) is ollm.TLSError
    # A loop in the chain (a cause that points back) ends instead of spinning.
    outer = httpx.ConnectError("outer")
    inner = httpx.ConnectError("inner")
    outer.__cause__ = inner
    inner.__context__ = outer
    assert type(error(outer)) is ollm.ConnectionFailedError


def test_describe_is_type_and_stripped_message_or_type_alone() -> None:
    assert describe(ValueError("  bad value \n")) == "ValueError: bad value"
    assert describe(ValueError()) == "ValueError"
    assert describe(ValueError("   ")) == "ValueError"
    assert describe(httpx.ReadError("reset")) == "ReadError: reset"


HEADER_STEP = (
    "which would corrupt the request. Remove it from the headers you configured "
    "(an API key or extra header copied with its newline, for example)."
)


@pytest.mark.parametrize(
    ("name", "value", "where"),
    [
        ("X-Api-Key", "sk-123\n", "value"),
        ("X-Api-Key", "a\0b", "value"),
        ("X-Api-Key\r", "sk-123", "name"),
        ("X-Bad\n", "also\nbad", "name"),
    ],
)
def test_a_header_with_a_line_break_says_where_and_what_to_do(
    name: str, value: str, where: str
) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        check_header(name, value, ErrorContext(code_name="openai"))
    assert caught.value.message == (
        f"The HTTP header {name!r} has a line break or NUL character in its {where}, " + HEADER_STEP
    )
    assert caught.value.provider == "openai"


def test_a_header_check_without_a_context_names_no_provider() -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        check_header("X-Api-Key", "sk\r\n")
    assert caught.value.provider is None
    assert caught.value.code == "INVALID_REQUEST"
    check_header("X-Api-Key", "sk-123 with spaces and : colons")  # a clean header passes
