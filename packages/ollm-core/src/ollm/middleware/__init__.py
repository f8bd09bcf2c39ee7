"""ollm's own middleware: ``redact``, ``audit`` and ``select-tools``, ordinary plugins
run only when named.

::

    ollm chat --middleware redact -m llama3.2 "..."     # keys never reach the screen or log
    ollm chat --middleware audit -t current_time "..."  # a JSON line per request and call

In Python, name them (``ChatClient(middleware=["redact", "audit"])``) or build them with
settings of your own: ``Redact(patterns=[...])``, ``Audit(path)``,
``ToolSelection(max_tools=8, always=["search"])`` (``ollm chat --tools-max 8``),
``ToolSelection(8, embed_model="nomic-embed-text")`` (``--tools-embed nomic-embed-text``).
A middleware that records content applies the chat's ``redact`` with
``redaction(ctx)(value)``, whatever their order.

Names load on first use: importing this package costs nothing.
"""

from __future__ import annotations

from ollm.kit import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ollm.middleware.audit import Audit
    from ollm.middleware.redact import DEFAULT_PATTERNS, Redact
    from ollm.middleware.tool_selection import ToolSelection
    from ollm.runtime.middleware import redaction

__all__ = ["DEFAULT_PATTERNS", "Audit", "Redact", "ToolSelection", "redaction"]

_LAZY: dict[str, str] = {
    "Audit": "ollm.middleware.audit",
    "DEFAULT_PATTERNS": "ollm.middleware.redact",
    "Redact": "ollm.middleware.redact",
    "ToolSelection": "ollm.middleware.tool_selection",
    "redaction": "ollm.runtime.middleware",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
