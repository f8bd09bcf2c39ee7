"""``audit``: one JSON line per request and per tool call, appended to a file.

A request's line says when, which conversation and turn, the provider and model, how
many messages went and the newest of them, the tools offered and the options. A tool
call's line has the call as it ran (and the model's arguments when a middleware or a
person changed them) and its result, a refusal included. Keys are redacted in every line
(``redact``'s built-in patterns, and the chat's own ``Redact`` when it has one).

The file is private (``0600``) like the conversation log: it holds what was asked and
answered. An existing file that others may read is refused, never written to (the chat
ends with ``MIDDLEWARE_FAILED`` before its first request, saying how to make it private),
as ssh refuses a key file with loose permissions.

The path is ``Audit(path)``; for ``--middleware audit``, ``$OLLM_AUDIT_PATH``, else
``audit.jsonl`` beside the conversation log (``ollm logs path``).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from ollm.middleware.redact import Redact
from ollm.runtime.middleware import redaction
from ollm.tools.result import ToolResult
from ollm.types.messages import Message, ToolCall
from ollm.types.middleware import MiddlewareContext
from ollm.types.request import ProviderRequest
from ollm.types.text import encode_json

__all__ = ["ENV_AUDIT_PATH", "Audit"]

ENV_AUDIT_PATH = "OLLM_AUDIT_PATH"


class Audit:
    """A middleware that appends a JSON line per request and tool call to ``path``,
    keys redacted by ``redact`` (``Redact()`` unless given)."""

    name = "audit"

    def __init__(self, path: str | os.PathLike[str], *, redact: Redact | None = None) -> None:
        self.path = Path(path).expanduser()
        self.redact = Redact() if redact is None else redact
        self._lock = threading.Lock()  # parallel calls end in parallel threads

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Audit:
        """The audit file ``$OLLM_AUDIT_PATH`` names, else ``audit.jsonl`` beside the
        conversation log."""
        env = os.environ if environ is None else environ
        given = env.get(ENV_AUDIT_PATH, "").strip()
        if given:
            return cls(given)
        from ollm.logs import logs_path

        return cls(logs_path(env).with_name("audit.jsonl"))

    def on_request(self, ctx: MiddlewareContext, request: ProviderRequest) -> None:
        """A line for the request (which goes on unchanged)."""
        last = request.messages[-1] if request.messages else None
        self._write(
            ctx,
            "request",
            messages=len(request.messages),
            last=_message(last) if last is not None else None,
            tools=[tool.name for tool in request.tools],
            options=msgspec.to_builtins(request.options),
        )

    def after_tool_call(self, ctx: MiddlewareContext, call: ToolCall, result: ToolResult) -> None:
        """A line for the call and its result (which goes on unchanged)."""
        entry: dict[str, Any] = {"id": call.id, "name": call.name, "args": call.args}
        if call.original_args is not None:
            entry["original_args"] = call.original_args
        self._write(
            ctx,
            "tool_call",
            call=entry,
            result={"text": result.text, "is_error": result.is_error, "images": len(result.images)},
        )

    def _write(self, ctx: MiddlewareContext, kind: str, **fields: Any) -> None:
        line = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "kind": kind,
            "conversation": ctx.conversation_id,
            "turn": ctx.turn,
            "provider": ctx.provider,
            "model": ctx.model,
            **fields,
        }
        data = encode_json(self.redact.scrub(redaction(ctx)(line))) + b"\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                _check_private(fd, self.path)
                os.write(fd, data)
            finally:
                os.close(fd)


def _check_private(fd: int, path: Path) -> None:
    """Refuse a file others may read or write (one made here is ``0600`` or narrower)."""
    if os.name != "posix":
        return
    status = os.fstat(fd)
    mode = stat.S_IMODE(status.st_mode)
    if stat.S_ISREG(status.st_mode) and mode & 0o077:  # not /dev/null, a pipe...
        raise PermissionError(
            f"the audit file {path} is {mode:04o}: other users of this machine may read it, "
            f"so nothing was written to it. Make it private with: chmod 600 {path}"
        )


def _message(message: Message) -> dict[str, Any]:
    return {"role": message.role, "text": message.text}
