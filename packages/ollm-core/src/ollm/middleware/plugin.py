"""The plugin that offers ollm's own middleware, ``redact``, ``audit`` and ``select-tools``.

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


def _select_tools() -> object:
    from ollm.middleware.tool_selection import ToolSelection

    return ToolSelection()


def _audit() -> object:
    from ollm.middleware.audit import Audit

    return Audit.from_env()


@hookimpl
def ollm_middleware() -> list[MiddlewareSpec]:
    """``redact``, ``audit`` and ``select-tools``."""
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
        MiddlewareSpec(
            "select-tools",
            _select_tools,
            "Send at most 16 tools a request: those already called, then the most "
            "relevant to the conversation (ollm chat --tools-max N)",
        ),
    ]
