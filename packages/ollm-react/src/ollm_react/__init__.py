"""ollm-react: tool calling for models without native tools, through the ReAct protocol.

Installed next to ``ollm-core``, it registers the ``react`` strategy (and
``react-example``); the runtime uses it when a chat asks for it, when a model's
capabilities lack tools, or after the server answers that the model "does not support
tools". It also registers ``recover``: native tool calling that runs the calls a model
wrote as text (``<tool_call>``, ``<|python_tag|>``, ``[TOOL_CALLS]``, a bare JSON call),
which the runtime uses instead of plain native calling unless a chat turns it off
(``recover_text_tool_calls=False``, ``ollm chat --no-recover``). The pieces are public
for applications and tests:

- ``RecoveringStrategy`` and ``TextCallScanner``: the recovery, and its streaming reader;
- ``ReActStrategy``: the strategy itself (``worked_example=``, ``max_format_errors=``);
- ``JsonReActStrategy`` (``json-react``) and ``step_schema``: each step a JSON object the
  backend constrains;
- ``parse_reply``: a whole reply to ``ParsedAction``, ``ParsedAnswer`` or ``FormatProblem``;
- ``StreamScanner``: the incremental side (what to show, when to stop);
- ``build_instructions``, ``render_observation``, ``render_messages``: what the model reads.

Names load on first use, so discovery imports nothing but the small plugin module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.kit import lazy_exports
from ollm_react._version import __version__

if TYPE_CHECKING:
    from ollm_react._instructions import build_instructions, feedback, wrap_up_prompt
    from ollm_react._json_react import JsonReActStrategy, step_schema
    from ollm_react._parser import (
        FormatProblem,
        ParsedAction,
        ParsedAnswer,
        ParsedReply,
        parse_reply,
        resolve_tool,
    )
    from ollm_react._placeholder import is_placeholder
    from ollm_react._recover import RecoveringStrategy, TextCallScanner
    from ollm_react._render import render_messages, render_observation
    from ollm_react._scanner import StreamScanner
    from ollm_react._strategy import OBSERVATION_STOP, ReActStrategy

__all__ = [
    "OBSERVATION_STOP",
    "FormatProblem",
    "JsonReActStrategy",
    "ParsedAction",
    "ParsedAnswer",
    "ParsedReply",
    "ReActStrategy",
    "RecoveringStrategy",
    "StreamScanner",
    "TextCallScanner",
    "__version__",
    "build_instructions",
    "feedback",
    "is_placeholder",
    "parse_reply",
    "render_messages",
    "render_observation",
    "resolve_tool",
    "step_schema",
    "wrap_up_prompt",
]

_WHERE = {
    "build_instructions": "_instructions",
    "feedback": "_instructions",
    "wrap_up_prompt": "_instructions",
    "JsonReActStrategy": "_json_react",
    "step_schema": "_json_react",
    "FormatProblem": "_parser",
    "ParsedAction": "_parser",
    "ParsedAnswer": "_parser",
    "ParsedReply": "_parser",
    "parse_reply": "_parser",
    "is_placeholder": "_placeholder",
    "resolve_tool": "_parser",
    "render_messages": "_render",
    "render_observation": "_render",
    "RecoveringStrategy": "_recover",
    "TextCallScanner": "_recover",
    "StreamScanner": "_scanner",
    "OBSERVATION_STOP": "_strategy",
    "ReActStrategy": "_strategy",
}


__getattr__, __dir__ = lazy_exports(__name__, {k: f".{v}" for k, v in _WHERE.items()}, globals())
