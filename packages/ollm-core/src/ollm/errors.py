"""The one exception tree of ollm.

Every error carries a stable ``code`` (a short upper-case string that scripts and the
event stream can match on) and a message that says what happened and what to do next.
The same code travels in the ``error`` event of a chat, so the two views never disagree.

Four families group the codes, so that a caller can catch a kind of failure without
listing codes (``except ollm.TransportError``); the codes themselves never change::

    OllmError
    ├── TransportError            the way to the server failed
    │   ├── ConnectionFailedError     CONNECTION_FAILED
    │   ├── RequestTimeoutError       TIMEOUT
    │   ├── TLSError                  TLS_ERROR
    │   └── StreamInterruptedError    STREAM_INTERRUPTED
    ├── ServerError               the server answered, and said no (or nonsense)
    │   ├── RateLimitedError          RATE_LIMITED
    │   ├── AuthenticationError       AUTH_FAILED
    │   ├── ModelNotFoundError        MODEL_NOT_FOUND
    │   ├── BadResponseError          BAD_RESPONSE
    │   ├── ContentBlockedError       CONTENT_BLOCKED
    │   ├── ToolsUnsupportedError     TOOLS_UNSUPPORTED
    │   ├── ContextExceededError      CONTEXT_EXCEEDED
    │   └── ProviderError             PROVIDER_ERROR
    ├── ToolError                 a tool could not be made, found or run
    │   ├── ToolNotFoundError         TOOL_NOT_FOUND
    │   ├── InvalidToolError          INVALID_TOOL
    │   ├── ToolArgumentsError        INVALID_ARGUMENTS
    │   ├── ToolExecutionError        TOOL_FAILED
    │   ├── ToolDeniedError           TOOL_DENIED
    │   └── ToolsetError              TOOLSET_FAILED (or a toolset's own code)
    ├── UsageError                what was asked cannot be done as asked
    │   ├── InvalidRequestError       INVALID_REQUEST
    │   │   └── PolicyError               POLICY_INVALID
    │   ├── ConversationBusyError     CONVERSATION_BUSY
    │   ├── ProviderNotFoundError     PROVIDER_NOT_FOUND
    │   ├── CapabilityError           UNSUPPORTED
    │   ├── PluginError               PLUGIN_ERROR
    │   ├── MiddlewareError           MIDDLEWARE_FAILED
    │   ├── InvalidHistoryError       INVALID_HISTORY
    │   └── TokenLimitError           TOKEN_LIMIT
    └── LogsUnavailableError      LOGS_UNAVAILABLE (the conversation log, not a chat)

Two codes say that a conversation is too long, and they differ in who found it:
``TOKEN_LIMIT`` is ollm's own count before sending (nothing was sent, or a compaction
could not make the history fit); ``CONTEXT_EXCEEDED`` is the server's refusal (Ollama's
``exceed_context_size_error``, OpenAI's "maximum context length", vLLM's, SGLang's and
llama.cpp's wordings, Gemini's token count), or a reply the server evaluated from a
prompt it cut (``on_truncation="error"``). The runtime compacts once on
``CONTEXT_EXCEEDED`` and sends again.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

__all__ = [
    "AuthenticationError",
    "BadResponseError",
    "CapabilityError",
    "ConnectionFailedError",
    "ContentBlockedError",
    "ContextExceededError",
    "ConversationBusyError",
    "ErrorCode",
    "InvalidHistoryError",
    "InvalidRequestError",
    "InvalidToolError",
    "LogsUnavailableError",
    "MiddlewareError",
    "ModelNotFoundError",
    "OllmError",
    "OutputInvalidError",
    "PluginError",
    "PolicyError",
    "ProviderError",
    "ProviderNotFoundError",
    "RateLimitedError",
    "RequestTimeoutError",
    "ServerError",
    "StreamInterruptedError",
    "TLSError",
    "TokenLimitError",
    "ToolArgumentsError",
    "ToolDeniedError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolsUnsupportedError",
    "ToolsetError",
    "TransportError",
    "UsageError",
    "error_from_code",
]


class ErrorCode:
    """The stable codes. They never change meaning once published."""

    CONNECTION_FAILED = "CONNECTION_FAILED"
    TIMEOUT = "TIMEOUT"
    MODEL_NOT_FOUND = "MODEL_NOT_FOUND"
    TOOLS_UNSUPPORTED = "TOOLS_UNSUPPORTED"
    BAD_RESPONSE = "BAD_RESPONSE"
    STREAM_INTERRUPTED = "STREAM_INTERRUPTED"
    PROVIDER_ERROR = "PROVIDER_ERROR"
    TOKEN_LIMIT = "TOKEN_LIMIT"
    PROVIDER_NOT_FOUND = "PROVIDER_NOT_FOUND"
    PLUGIN_ERROR = "PLUGIN_ERROR"
    TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
    INVALID_TOOL = "INVALID_TOOL"
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    TOOL_FAILED = "TOOL_FAILED"
    TOOL_TIMEOUT = "TOOL_TIMEOUT"
    TOOL_LIMIT = "TOOL_LIMIT"
    CANCELLED = "CANCELLED"
    UNSUPPORTED = "UNSUPPORTED"
    INVALID_REQUEST = "INVALID_REQUEST"
    CONVERSATION_BUSY = "CONVERSATION_BUSY"
    FORMAT_ERROR = "FORMAT_ERROR"
    TOOLSET_FAILED = "TOOLSET_FAILED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    TLS_ERROR = "TLS_ERROR"
    RATE_LIMITED = "RATE_LIMITED"
    AUTH_FAILED = "AUTH_FAILED"
    CONTENT_BLOCKED = "CONTENT_BLOCKED"
    LOGS_UNAVAILABLE = "LOGS_UNAVAILABLE"
    MIDDLEWARE_FAILED = "MIDDLEWARE_FAILED"
    TOOL_DENIED = "TOOL_DENIED"
    OUTPUT_INVALID = "OUTPUT_INVALID"
    CONTEXT_EXCEEDED = "CONTEXT_EXCEEDED"
    INVALID_HISTORY = "INVALID_HISTORY"
    POLICY_INVALID = "POLICY_INVALID"


class OllmError(Exception):
    """Base of every error ollm raises on purpose.

    ``message`` is complete on its own: it names what failed and the next step.
    ``provider`` and ``model`` are filled when the error concerns one.
    """

    code: ClassVar[str] = ErrorCode.INTERNAL_ERROR

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        status: int | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.model = model
        self.status = status
        if code is not None:
            # An instance may carry a more precise code than its class (for example a
            # provider error rebuilt from an event whose code has no class of its own).
            self.code = code  # type: ignore[misc]

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class TransportError(OllmError):
    """The way to the server failed: no connection, a timeout, TLS, a broken stream."""


class ServerError(OllmError):
    """The server answered, and refused the request or answered something unusable."""


class ToolError(OllmError):
    """A tool could not be made, found or run (its result tells the model so)."""


class UsageError(OllmError):
    """What was asked cannot be done as asked: fix the request, the setup or the input."""


class ConnectionFailedError(TransportError):
    """The provider's server could not be reached."""

    code = ErrorCode.CONNECTION_FAILED


class RequestTimeoutError(TransportError):
    """Connecting to, or reading from, the provider took longer than allowed."""

    code = ErrorCode.TIMEOUT


class ModelNotFoundError(ServerError):
    """The provider does not have the model asked for."""

    code = ErrorCode.MODEL_NOT_FOUND


class ToolsUnsupportedError(ServerError):
    """The model cannot take tools natively (the runtime may switch to ReAct)."""

    code = ErrorCode.TOOLS_UNSUPPORTED


class BadResponseError(ServerError):
    """The provider answered with something that is not its documented format."""

    code = ErrorCode.BAD_RESPONSE


class StreamInterruptedError(TransportError):
    """The reply stream ended before the provider said it was done."""

    code = ErrorCode.STREAM_INTERRUPTED


class TLSError(TransportError):
    """A secure connection could not be set up: certificate, handshake, protocol."""

    code = ErrorCode.TLS_ERROR


class RateLimitedError(ServerError):
    """The provider refused the request for now (HTTP 429), even after waiting and retrying.

    ``retry_after`` is the wait the server asked for, in seconds, when it said one.
    """

    code = ErrorCode.RATE_LIMITED

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class AuthenticationError(ServerError):
    """The server refused the credentials (HTTP 401 or 403): a missing or wrong API key."""

    code = ErrorCode.AUTH_FAILED


class ContentBlockedError(ServerError):
    """The provider's safety filters blocked the prompt or the reply; the reason is named."""

    code = ErrorCode.CONTENT_BLOCKED


# How servers say that a prompt does not fit (lower case): Ollama and llama.cpp's
# server ("request (9000 tokens) exceeds the available context size (4096 tokens)",
# type exceed_context_size_error), Ollama's own runner ("the input length exceeds the
# context length"), OpenAI ("This model's maximum context length is 8192 tokens",
# code context_length_exceeded), vLLM ("The decoder prompt (length 9000) is longer
# than the maximum model length of 4096"), SGLang ("The input (9000 tokens) is longer
# than the model's context length (4096 tokens)"), Gemini ("The input token count
# (1200000) exceeds the maximum number of tokens allowed (1048576)").
_CONTEXT_PHRASES = (
    "exceed_context_size",
    "context_length_exceeded",
    "exceeds the available context size",
    "exceeds the context length",
    "maximum context length",
    "maximum model length",
    "model's context length",
    "context length exceeded",
    "exceeds the context window",
    "exceeds the maximum number of tokens",
    "input token count",
    "prompt is too long",
    "prompt too long",
    "too many tokens",
)
_WINDOW_PATTERNS = tuple(
    re.compile(p)
    for p in (
        r'"?n_ctx"?\s*[:=]\s*(\d+)',
        r"maximum context length (?:is|of) (\d+)",
        r"maximum model length (?:is|of) (\d+)",
        r"context (?:size|length|window) (?:is |of )?\(?(\d+)",
        r"maximum number of tokens allowed \((\d+)\)",
        r"\d+ tokens > (\d+)",
    )
)
_PROMPT_PATTERNS = tuple(
    re.compile(p)
    for p in (
        r'"?n_prompt_tokens"?\s*[:=]\s*(\d+)',
        r"(\d+) in the messages",
        r"messages resulted in (\d+) tokens",
        r"(?:request|input) \((\d+) tokens\)",
        r"prompt \(length (\d+)\)",
        r"input token count \((\d+)\)",
        r"(?:requested|prompt has|prompt is) (\d+) tokens",
        r"(\d+) tokens > \d+",
    )
)


def _first_number(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


class ContextExceededError(ServerError):
    """The server refused a request too long for the model's context window (or, with
    ``on_truncation="error"``, cut it before answering).

    ``prompt_tokens`` and ``context_window`` are the sizes the server named, when it
    named them. Not ``TOKEN_LIMIT``: that is ollm's own count, before anything is sent.
    """

    code = ErrorCode.CONTEXT_EXCEEDED

    def __init__(
        self,
        message: str,
        *,
        prompt_tokens: int | None = None,
        context_window: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.prompt_tokens = prompt_tokens
        self.context_window = context_window

    @staticmethod
    def said_in(text: str) -> bool:
        """Whether a server's error ``text`` says the prompt does not fit the window."""
        lowered = text.lower()
        return any(phrase in lowered for phrase in _CONTEXT_PHRASES)

    @classmethod
    def from_server(cls, who: str, said: str, *, name: str, **kwargs: Any) -> ContextExceededError:
        """The error for a server's refusal ``said`` (its own words), sizes read from it.

        ``who`` names the server ("Ollama at http://..."), ``name`` the model.
        """
        lowered = said.lower()
        prompt = _first_number(_PROMPT_PATTERNS, lowered)
        window = _first_number(_WINDOW_PATTERNS, lowered)
        if prompt is not None and window is not None:
            sizes = f" ({prompt} tokens, for a window of {window})"
        elif window is not None:
            sizes = f" (its window is {window} tokens)"
        else:
            sizes = ""
        return cls(
            f"{who} refused the request: the conversation is too long for {name}{sizes}. "
            f"The server said: {said}. Shorten the conversation or start a new one, or "
            "raise the context window (context_window=...; ollm chat --context-window).",
            prompt_tokens=prompt,
            context_window=window,
            **kwargs,
        )


class ProviderError(ServerError):
    """The provider reported an error of its own (its message is kept)."""

    code = ErrorCode.PROVIDER_ERROR


class MiddlewareError(UsageError):
    """A middleware the chat was given raised, answered with something it must not, or
    took longer than its timeout; the chat ends, its history intact. The message names
    the middleware and its method."""

    code = ErrorCode.MIDDLEWARE_FAILED


class OutputInvalidError(ServerError):
    """The model's answer never matched the output's type (``chat(..., output=T)``),
    even after its corrections. ``raw`` is its last reply, ``errors`` what was wrong with
    it (``$.age: expected int, got str``); the history keeps every attempt."""

    code = ErrorCode.OUTPUT_INVALID

    def __init__(
        self, message: str, *, raw: str = "", errors: tuple[str, ...] = (), **kwargs: Any
    ) -> None:
        super().__init__(message, **kwargs)
        self.raw = raw
        self.errors = errors


class InvalidHistoryError(UsageError):
    """The messages a request would carry break the rules every server keeps (a tool
    result without its call, a call without its result): a compactor or a middleware
    changed them wrongly. Nothing was sent; the conversation itself is intact."""

    code = ErrorCode.INVALID_HISTORY


class TokenLimitError(UsageError):
    """A request would not fit in the model's context window; nothing was sent."""

    code = ErrorCode.TOKEN_LIMIT


class ProviderNotFoundError(UsageError):
    """No provider is registered under the name asked for."""

    code = ErrorCode.PROVIDER_NOT_FOUND


class PluginError(UsageError):
    """A plugin failed to load or to contribute (raised only in strict mode)."""

    code = ErrorCode.PLUGIN_ERROR


class ToolNotFoundError(ToolError):
    """No tool is registered (or enabled) under the name asked for."""

    code = ErrorCode.TOOL_NOT_FOUND


class InvalidToolError(ToolError):
    """A function cannot be made into a tool (for example a parameter lacks a type)."""

    code = ErrorCode.INVALID_TOOL


class ToolArgumentsError(ToolError):
    """The arguments a model gave a tool do not match its parameters."""

    code = ErrorCode.INVALID_ARGUMENTS


class ToolExecutionError(ToolError):
    """A tool raised, or ran past its timeout."""

    code = ErrorCode.TOOL_FAILED


class ToolDeniedError(ToolError):
    """A tool call was refused before it ran: by an approval rule, a person, or a
    middleware (the reason goes back to the model, and the chat goes on)."""

    code = ErrorCode.TOOL_DENIED


class ToolsetError(ToolError):
    """A toolset could not be opened, or stopped working (an MCP server that exited...).

    A toolset may give a more precise code of its own (``MCP_SERVER_FAILED``...).
    """

    code = ErrorCode.TOOLSET_FAILED


class CapabilityError(UsageError):
    """The provider does not offer the capability asked for (models, embeddings...)."""

    code = ErrorCode.UNSUPPORTED


class InvalidRequestError(UsageError):
    """The request itself is wrong (an empty model name, a bad option...)."""

    code = ErrorCode.INVALID_REQUEST


class PolicyError(InvalidRequestError):
    """An approval policy cannot be read or understood: nothing may run by it."""

    code = ErrorCode.POLICY_INVALID


class ConversationBusyError(UsageError):
    """A conversation already has a chat in progress; one at a time."""

    code = ErrorCode.CONVERSATION_BUSY


class LogsUnavailableError(OllmError):
    """The conversation log cannot be read or written; the message says why and what to do."""

    code = ErrorCode.LOGS_UNAVAILABLE


_BY_CODE: dict[str, type[OllmError]] = {
    cls.code: cls
    for cls in (
        ConnectionFailedError,
        OutputInvalidError,
        RequestTimeoutError,
        ModelNotFoundError,
        ToolsUnsupportedError,
        BadResponseError,
        ContextExceededError,
        StreamInterruptedError,
        TLSError,
        RateLimitedError,
        AuthenticationError,
        ContentBlockedError,
        ProviderError,
        TokenLimitError,
        ProviderNotFoundError,
        PluginError,
        ToolNotFoundError,
        InvalidToolError,
        ToolArgumentsError,
        ToolExecutionError,
        ToolDeniedError,
        ToolsetError,
        CapabilityError,
        MiddlewareError,
        InvalidHistoryError,
        InvalidRequestError,
        PolicyError,
        ConversationBusyError,
        LogsUnavailableError,
    )
}


def error_from_code(code: str, message: str) -> OllmError:
    """Rebuild the exception that matches an error event's code."""
    cls = _BY_CODE.get(code, OllmError)
    if cls is OllmError:
        return OllmError(message, code=code)
    return cls(message)
