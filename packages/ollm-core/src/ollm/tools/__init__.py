"""Tools from plain functions: schema from type hints, descriptions from docstrings."""

from ollm.tools.tool import Tool, ToolContext, render_result, tool

__all__ = ["Tool", "ToolContext", "render_result", "tool"]
