"""An MCP server's tools as ollm tools, and its answers as what the model reads."""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import mcp_types
import msgspec

from ollm import ApprovalHint, ArgumentsValidator, Tool, ToolApproval, ToolResult
from ollm.kit import valid_tool_name
from ollm.types import ImagePart, ToolSchema

__all__ = ["approval_of", "needs_task_call", "result_for_model", "tool_from_mcp"]

log = logging.getLogger(__name__)

_MESSAGE_CHARS = 300
CallTool = Callable[[str, dict[str, Any]], Awaitable[ToolResult]]


def tool_from_mcp(
    server: str,
    listed: mcp_types.Tool,
    call: CallTool,
    timeout: float | None,
    *,
    trusted: bool = False,
) -> Tool | None:
    """An ollm tool that calls ``listed`` through ``call``; ``None`` (and a warning) if its
    schema cannot be offered to a model."""
    schema = listed.input_schema
    kind = schema.get("type", "object")
    if kind != "object":
        log.warning(
            "MCP server %r: tool %r takes %s, not an object of arguments; left out",
            server,
            listed.name,
            kind,
        )
        return None
    validator = _validator(server, listed.name, schema)
    if validator is None:
        return None
    parameters = {"type": "object", "properties": {}, **schema}
    description = listed.description or listed.title or ""
    remote = listed.name

    async def call_tool(**arguments: Any) -> ToolResult:
        return await call(remote, arguments)

    return Tool.from_schema(
        ToolSchema(valid_tool_name(remote), description, parameters),
        call_tool,
        validator=validator,
        timeout=timeout,
        approval=approval_of(listed, trusted=trusted),
    )


def approval_of(listed: mcp_types.Tool, *, trusted: bool = False) -> ToolApproval:
    """What the server's annotations ask of the tool's calls: a read-only tool is
    allowed, a destructive one asks. The MCP specification calls annotations untrusted
    unless the server is: from a server not marked ``trust``, they are an
    ``ApprovalHint``, never less strict than the policy's default; from a trusted one,
    the tool's own approval. Rules a chat is given come first either way."""
    hints = listed.annotations
    if hints is None:
        return None
    action: Literal["allow", "ask"]
    if hints.read_only_hint is True:
        action, source = "allow", "readOnlyHint"
    elif hints.destructive_hint is True:
        action, source = "ask", "destructiveHint"
    else:
        return None
    if trusted:
        return action
    return ApprovalHint(action, f"the server's {source}")


def needs_task_call(listed: mcp_types.Tool) -> bool:
    """Whether the tool runs only as an MCP task (``execution.taskSupport: required``):
    a plain call, the only kind ollm makes, fails with -32601."""
    execution = listed.execution
    return execution is not None and execution.task_support == "required"


def _validator(server: str, name: str, schema: dict[str, Any]) -> ArgumentsValidator | None:
    """A JSON Schema check of a model's arguments (no remote ``$ref``s are fetched)."""
    from jsonschema.exceptions import SchemaError, best_match
    from jsonschema.validators import validator_for
    from referencing import Registry

    checker = validator_for(schema)
    try:
        checker.check_schema(schema)
    except SchemaError as exc:
        log.warning(
            "MCP server %r: the schema of tool %r is not valid JSON Schema (%s); left out",
            server,
            name,
            _short(exc.message),
        )
        return None
    validator = checker(schema, registry=Registry())

    def validate(arguments: dict[str, Any]) -> str | None:
        try:
            error = best_match(validator.iter_errors(arguments))
        except Exception as exc:  # an unresolvable $ref, a recursion limit...
            return f"they could not be checked against the tool's schema ({type(exc).__name__})"
        if error is None:
            return None
        return f"{_short(error.message)} - at {error.json_path}"

    return validate


def result_for_model(result: mcp_types.CallToolResult) -> ToolResult:
    """Text blocks as they are (else the structured content as JSON), images as image
    parts, other blocks as short notes; ``isError`` makes it an error for the model."""
    texts: list[str] = []
    notes: list[str] = []
    images: list[ImagePart] = []
    blocks: list[Any] = list(result.content)  # a newer server may send newer kinds
    for block in blocks:
        if isinstance(block, mcp_types.TextContent):
            texts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent):
            image = _image(block.data, block.mime_type)
            if image is None:
                notes.append(f"[a {block.mime_type} image that is not valid base64]")
            else:
                images.append(image)
        elif isinstance(block, mcp_types.AudioContent):
            notes.append(f"[{block.mime_type} audio, not shown: ollm does not pass audio on]")
        elif isinstance(block, mcp_types.ResourceLink):
            notes.append(f"[resource {block.name}: {block.uri}]")
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                texts.append(resource.text)
            else:
                mime = resource.mime_type or "application/octet-stream"
                image = _image(resource.blob, mime) if mime.startswith("image/") else None
                if image is None:
                    notes.append(f"[{mime} resource {resource.uri}, not shown]")
                else:
                    images.append(image)
        else:
            notes.append(f"[{getattr(block, 'type', 'unknown')} content, not shown]")
    if not texts and result.structured_content is not None:
        texts.append(msgspec.json.encode(result.structured_content).decode("utf-8"))
    return ToolResult("\n".join(texts + notes), images=tuple(images), is_error=result.is_error)


def _image(data: str, mime_type: str) -> ImagePart | None:
    try:
        return ImagePart(base64.b64decode(data, validate=True), mime_type)
    except (binascii.Error, ValueError):
        return None


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 3] + "..."
