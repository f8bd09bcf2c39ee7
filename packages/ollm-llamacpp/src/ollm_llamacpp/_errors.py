"""The stable codes of ollm-llamacpp's own errors; each message names the file."""

from __future__ import annotations

from ollm.errors import (
    CapabilityError,
    InvalidRequestError,
    OllmError,
    ProviderError,
    UsageError,
)

__all__ = ["PROVIDER", "LlamaCppErrorCode", "model_error"]

PROVIDER = "llamacpp"


class LlamaCppErrorCode:
    """The codes ollm-llamacpp's errors carry beside ollm's (``MODEL_NOT_FOUND``...)."""

    NOT_GGUF = "LLAMACPP_NOT_GGUF"
    """The file is not a GGUF model, or its header is cut short or malformed."""
    UNSUPPORTED_ARCHITECTURE = "LLAMACPP_UNSUPPORTED_ARCHITECTURE"
    """The llama.cpp that llama-cpp-python bundles does not know the model's architecture."""
    MODEL_TOO_LARGE = "LLAMACPP_MODEL_TOO_LARGE"
    """The model and its context need more memory than the machine has available."""
    LOAD_FAILED = "LLAMACPP_LOAD_FAILED"
    """llama.cpp could not load the model for another reason (its words are quoted)."""
    TEMPLATE_FAILED = "LLAMACPP_TEMPLATE_FAILED"
    """The model's chat template refused the conversation, or failed to render it."""


_CLASSES: dict[str, type[OllmError]] = {
    LlamaCppErrorCode.NOT_GGUF: InvalidRequestError,
    LlamaCppErrorCode.UNSUPPORTED_ARCHITECTURE: CapabilityError,
    LlamaCppErrorCode.MODEL_TOO_LARGE: UsageError,
    LlamaCppErrorCode.LOAD_FAILED: ProviderError,
    LlamaCppErrorCode.TEMPLATE_FAILED: InvalidRequestError,
}


def model_error(message: str, code: str, *, model: str | None = None) -> OllmError:
    """The ``OllmError`` of ``code`` (its family: usage or provider) with ``message``."""
    cls: type[OllmError] = _CLASSES[code]
    return cls(message, provider=PROVIDER, model=model, code=code)
