"""Tools from plain functions (schema from type hints, descriptions from docstrings), and
toolsets: tool packs that are opened and closed.

Internal: not part of ollm's public API (import its public names from ``ollm``:
``ollm.tool``, ``ollm.Tool``...); its layout may change in any release.
"""

from ollm.tools.approval import (
    ApprovalAction,
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalRule,
    policy_path,
)
from ollm.tools.result import ToolResult
from ollm.tools.tool import (
    ArgumentsValidator,
    Tool,
    ToolApproval,
    ToolContext,
    render_result,
    tool,
)
from ollm.tools.toolset import TOOLSET_SEPARATOR, Toolset, toolset_tool_name, valid_tool_name

__all__ = [
    "TOOLSET_SEPARATOR",
    "ApprovalAction",
    "ApprovalDecision",
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
