"""What a tool may return when one value is not enough: text with images, or an error."""

from __future__ import annotations

import msgspec

from ollm.types.messages import ImagePart

__all__ = ["ToolResult"]


class ToolResult(msgspec.Struct, frozen=True, omit_defaults=True):
    """A tool's answer as the model will read it.

    A tool usually returns any value (a string as it is, anything else as JSON). It
    returns a ``ToolResult`` to add images (they go into the tool message, and are
    replaced by a short note for a model that cannot see images), or to report an
    error without raising: ``is_error=True`` reaches the model as a failed call with
    ``text`` as the reason, and the chat goes on. Toolsets such as ``ollm-mcp`` build
    one from an MCP server's answer.
    """

    text: str = ""
    images: tuple[ImagePart, ...] = ()
    is_error: bool = False
