"""What a member's failure before its reply started means for the request.

- ``unreachable``: the connection was refused, reset or timed out (the member's circuit
  opens), and ``failed``: the server failed (HTTP 5xx, an answer that is not its format,
  a refused key); both try the next member, and use the request's retry budget.
- ``rate_limited``: the server asked to wait (HTTP 429, 503 with ``Retry-After``): the
  member rests that long, another is tried first; it uses the budget too.
- ``model_missing``: the member does not have the model: the next member.
- ``context``: the conversation is longer than the member's context window: a member
  with a larger window.
- ``tools``: the model cannot call tools there: a member where it can, before the
  runtime falls back to ReAct.
- ``final``: anything else (a request no server would take): no failover.

After the reply started, any failure ends the turn ``STREAM_INTERRUPTED``: two servers'
words are never joined.
"""

from __future__ import annotations

from typing import Literal

from ollm.errors import ErrorCode
from ollm_pool._member import TRANSPORT_CODES

__all__ = ["CONTEXT_CODES", "USES_BUDGET", "Kind", "kind_of"]

Kind = Literal[
    "unreachable", "failed", "rate_limited", "model_missing", "context", "tools", "final"
]

# A request longer than the context window: the server refused it (CONTEXT_EXCEEDED), or
# the member's own count before sending (TOKEN_LIMIT): a member with a larger window.
CONTEXT_CODES = frozenset({ErrorCode.TOKEN_LIMIT, ErrorCode.CONTEXT_EXCEEDED})
_FAILED = frozenset({ErrorCode.PROVIDER_ERROR, ErrorCode.BAD_RESPONSE, ErrorCode.AUTH_FAILED})

USES_BUDGET: frozenset[Kind] = frozenset({"unreachable", "failed", "rate_limited"})
"""The kinds of failure that count against the request's retry budget (the others only
say where not to go)."""


def kind_of(code: str) -> Kind:
    """What a failure with ``code``, before the reply started, calls for."""
    if code in TRANSPORT_CODES:
        return "unreachable"
    if code == ErrorCode.RATE_LIMITED:
        return "rate_limited"
    if code in _FAILED:
        return "failed"
    if code == ErrorCode.MODEL_NOT_FOUND:
        return "model_missing"
    if code in CONTEXT_CODES:
        return "context"
    if code == ErrorCode.TOOLS_UNSUPPORTED:
        return "tools"
    return "final"
