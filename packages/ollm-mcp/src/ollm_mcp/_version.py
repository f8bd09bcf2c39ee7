"""The version of ollm-mcp."""

__version__ = "0.1.0"
