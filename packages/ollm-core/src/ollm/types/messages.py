"""Messages of a conversation: roles, text and image parts, tool calls."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Literal

import msgspec

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "ROLES",
    "ImagePart",
    "Message",
    "Part",
    "Role",
    "TextPart",
    "ToolCall",
]

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(("system", "user", "assistant", "tool"))


class TextPart(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    """A piece of text."""

    text: str


class ImagePart(msgspec.Struct, frozen=True, tag="image", tag_field="type"):
    """An image, as raw bytes (base64 only when encoded to JSON)."""

    data: bytes
    mime_type: str = "image/png"

    @classmethod
    def from_file(cls, path: str | Path) -> ImagePart:
        """Read an image file; the MIME type comes from its extension."""
        # Imported here: mimetypes and pathlib cost start-up time that few chats need.
        import mimetypes
        from pathlib import Path

        path = Path(path)
        mime, _ = mimetypes.guess_type(path.name)
        return cls(data=path.read_bytes(), mime_type=mime or "application/octet-stream")

    @classmethod
    def from_base64(cls, data: str, mime_type: str = "image/png") -> ImagePart:
        """Build from base64 text; a ``data:...;base64,`` prefix is accepted and removed."""
        if data.startswith("data:"):
            header, _, data = data.partition(",")
            mime_type = header[5:].split(";", 1)[0] or mime_type
        return cls(data=base64.b64decode(data, validate=True), mime_type=mime_type)

    def to_base64(self) -> str:
        """Standard base64 with no ``data:`` prefix (what Ollama expects)."""
        return base64.b64encode(self.data).decode("ascii")


Part = TextPart | ImagePart


class ToolCall(msgspec.Struct, frozen=True, omit_defaults=True):
    """A model's request to run one tool. ``args`` is always a JSON object.

    ``invalid_args`` holds the arguments as the model wrote them when they were not a
    JSON object (a provider's server passes them on as text): ``args`` is then empty,
    the call is not run, and its result tells the model what was wrong, so it can
    call again.

    ``signature`` is opaque data the provider must send back with the call in later
    requests (Gemini's ``thoughtSignature``, which carries the model's reasoning from
    one step to the next); keep it with the call, never show or change it.

    ``original_args`` are the arguments the model wrote when a middleware (or a person
    approving the call) changed them before it ran: ``args`` are then those it ran
    with. Providers send ``args``; the history and the log keep both.
    """

    id: str
    name: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    invalid_args: str | None = None
    signature: str | None = None
    original_args: dict[str, Any] | None = None


class Message(msgspec.Struct, frozen=True, omit_defaults=True):
    """One message of a conversation.

    An assistant message keeps the tool calls it made, and a tool message keeps the
    name of the tool and the id of the call it answers: real servers need both to
    continue a conversation. ``incomplete`` marks an assistant reply that was cut
    short (cancelled or interrupted); ``is_error`` marks a tool result that is an error.
    """

    role: Role
    parts: tuple[Part, ...]
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    thinking: str | None = None
    incomplete: bool = False
    is_error: bool = False

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(
                f"role must be one of system, user, assistant or tool, not {self.role!r}"
            )
        if not self.parts:
            raise ValueError("a message needs at least one part (an empty text part will do)")
        if self.role == "tool" and (not self.name or not self.tool_call_id):
            raise ValueError("a tool message must name its tool and the id of the call it answers")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only an assistant message can carry tool calls")

    @property
    def text(self) -> str:
        """All text parts joined."""
        parts = self.parts
        if len(parts) == 1:
            part = parts[0]
            return part.text if isinstance(part, TextPart) else ""
        return "".join(p.text for p in parts if isinstance(p, TextPart))

    @property
    def images(self) -> tuple[ImagePart, ...]:
        """The image parts, in order."""
        return tuple(p for p in self.parts if isinstance(p, ImagePart))

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message."""
        return cls(role="system", parts=(TextPart(text),))

    @classmethod
    def user(cls, text: str = "", *, images: tuple[ImagePart, ...] = ()) -> Message:
        """A user message, with optional images."""
        return cls(role="user", parts=(TextPart(text), *images))

    @classmethod
    def assistant(
        cls,
        text: str = "",
        *,
        tool_calls: tuple[ToolCall, ...] = (),
        thinking: str | None = None,
        incomplete: bool = False,
    ) -> Message:
        """An assistant message; one that only calls tools has an empty text part."""
        return cls(
            role="assistant",
            parts=(TextPart(text),),
            tool_calls=tuple(tool_calls),
            thinking=thinking or None,
            incomplete=incomplete,
        )

    @classmethod
    def tool(
        cls,
        content: str,
        *,
        call: ToolCall,
        is_error: bool = False,
        images: tuple[ImagePart, ...] = (),
    ) -> Message:
        """The result of ``call``, as the model will read it (text, then any images)."""
        return cls(
            role="tool",
            parts=(TextPart(content), *images),
            name=call.name,
            tool_call_id=call.id,
            is_error=is_error,
        )
