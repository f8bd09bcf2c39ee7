"""A request the server refuses, with the HTTP status and the words the client reads."""

from __future__ import annotations

__all__ = ["Refused"]


class Refused(Exception):
    """Refuse a request: ``status``, ``message`` (what was wrong and what to do),
    ``param`` (the field at fault, for OpenAI's error shape), ``code`` (a stable code)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str = "invalid_request",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.retry_after = retry_after
