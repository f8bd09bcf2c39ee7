"""Typed output: a schema in, a validated value out (``chat(..., output=T)``).

``OutputType`` turns what a caller gives as ``output`` (a ``msgspec.Struct``, a
dataclass, a ``TypedDict``, a ``Literal`` or enum, a list of those, or a JSON Schema
dict) into the JSON Schema the model is asked for and msgspec's validation of the
reply; ``PartialJSON`` reads the value while it streams; ``NativeOutput`` is the
built-in output strategy.

Internal: not part of ollm's public API (import its public names from ``ollm``); its
layout may change in any release.
"""

from ollm.output.native import NativeOutput, extract_json, schema_instructions
from ollm.output.partial import PartialJSON
from ollm.output.schema import OutputMismatch, OutputType

__all__ = [
    "NativeOutput",
    "OutputMismatch",
    "OutputType",
    "PartialJSON",
    "extract_json",
    "schema_instructions",
]
