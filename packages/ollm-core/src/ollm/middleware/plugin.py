"""The plugin that offers ollm's own middleware, ``redact`` and ``audit``.

Discovery imports this module at every start, so it imports nothing: each middleware's
module is imported by its factory, when a chat names it.
"""

from __future__ import annotations

from ollm.hookspecs import hookimpl
from ollm.types.specs import MiddlewareSpec

__all__ = ["ollm_middleware"]


def _redact() -> object:
    from ollm.middleware.redact import Redact

    return Redact()


def _audit() -> object:
    from ollm.middleware.audit import Audit

    return Audit.from_env()


@hookimpl
def ollm_middleware() -> list[MiddlewareSpec]:
    """``redact`` and ``audit``."""
    return [
        MiddlewareSpec(
            "redact",
            _redact,
            "Remove API keys and tokens from what is shown, the events and the log",
        ),
        MiddlewareSpec(
            "audit",
            _audit,
            "Write one JSON line per request and tool call to $OLLM_AUDIT_PATH "
            "(else audit.jsonl beside the conversation log)",
        ),
    ]
