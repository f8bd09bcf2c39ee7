"""The built-in output strategy, ``native``, and what every output strategy may share:
the schema stated in words, and the JSON read out of a reply.

Internal: not part of ollm's public API (``ollm.kit`` has ``schema_instructions`` and
``extract_json`` for plugin authors); its layout may change in any release.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ollm.types.request import ProviderRequest
from ollm.types.text import encode_json

__all__ = ["NativeOutput", "extract_json", "schema_instructions", "with_system"]

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)


def schema_instructions(schema: dict[str, Any]) -> str:
    """The schema stated for the model: what to answer with, and nothing else."""
    return (
        "Answer with a single JSON value that matches this JSON Schema, and nothing "
        "else (no prose, no code fence):\n"
        f"{encode_json(schema, msgspec.json.encode).decode()}"
    )


def with_system(request: ProviderRequest, text: str) -> ProviderRequest:
    """``request`` with ``text`` after its system prompt (or as it)."""
    system = request.system_prompt
    return msgspec.structs.replace(request, system_prompt=f"{system}\n\n{text}" if system else text)


def extract_json(text: str) -> str:
    """The JSON value in a reply: the reply itself when it is one, else the content of
    its first ```json fence, else the text from its first ``{`` or ``[`` to the last
    matching closer; the reply, stripped, when none is found."""
    stripped = text.strip()
    if not stripped or stripped[0] in "{[":
        return stripped
    fenced = _FENCE.search(text)
    if fenced is not None:
        return fenced.group(1).strip()
    starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
    if not starts:
        return stripped
    start = min(starts)
    end = stripped.rfind("}" if stripped[start] == "{" else "]")
    return stripped[start : end + 1] if end > start else stripped


class NativeOutput:
    """The schema as the provider's native constraint (``response_format``) and in the
    system prompt; the reply is the value.

    ``constrain=False`` leaves the constraint out (a server that ignored it, when no
    ``prompted`` strategy is installed): the prompt alone asks.
    """

    def __init__(self, *, constrain: bool = True) -> None:
        self.constrains = constrain
        self.name = "native" if constrain else "native-unconstrained"

    def prepare(self, request: ProviderRequest, schema: dict[str, Any]) -> ProviderRequest:
        """``request`` with the schema as ``response_format`` and in the system prompt."""
        if self.constrains:
            request = msgspec.structs.replace(request, response_format=schema)
        return with_system(request, schema_instructions(schema))

    def extract(self, text: str) -> str:
        """The reply's JSON (a fence or prose around it is tolerated)."""
        return extract_json(text)
