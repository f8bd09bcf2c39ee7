"""Tools from plain functions (schema from type hints, descriptions from docstrings), and
toolsets: tool packs that are opened and closed.

Internal: not part of ollm's public API (import its public names from ``ollm``:
``ollm.tool``, ``ollm.Tool``...); its layout may change in any release.
"""

from ollm._lazy import lazy_exports
from ollm.tools.result import ToolResult
from ollm.tools.tool import (
    ApprovalHint,
    ArgumentsValidator,
    Tool,
    ToolApproval,
    ToolContext,
    render_result,
    tool,
)
from ollm.tools.toolset import TOOLSET_SEPARATOR, Toolset, toolset_tool_name, valid_tool_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ollm.tools.approval import (
        ApprovalAction,
        ApprovalDecision,
        ApprovalPolicy,
        ApprovalRule,
        policy_path,
    )

__all__ = [
    "TOOLSET_SEPARATOR",
    "ApprovalAction",
    "ApprovalDecision",
    "ApprovalHint",
    "ApprovalPolicy",
    "ApprovalRule",
    "ArgumentsValidator",
    "Tool",
    "ToolApproval",
    "ToolContext",
    "ToolResult",
    "Toolset",
    "policy_path",
    "render_result",
    "tool",
    "toolset_tool_name",
    "valid_tool_name",
]

# The approval rules load on first use: a chat that has none never imports them.
_LAZY = dict.fromkeys(
    ("ApprovalAction", "ApprovalDecision", "ApprovalPolicy", "ApprovalRule", "policy_path"),
    "ollm.tools.approval",
)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
