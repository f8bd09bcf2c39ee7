"""Deterministic embedding vectors: the same text always gives the same unit vector."""

from __future__ import annotations

import math
import struct

__all__ = ["normalize", "text_vector"]

_WORDS = struct.Struct("<8I")


def text_vector(text: str, dimensions: int, *, salt: str = "") -> list[float]:
    """A vector of ``dimensions`` floats derived from ``text``, L2-normalized.

    Different texts give (almost surely) different vectors; the same text, dimensions
    and salt give the same vector on every machine and Python version.
    """
    import hashlib  # here: the echo provider's start-up need not pay for it

    seed = f"{salt}\x00{text}".encode()
    values: list[float] = []
    counter = 0
    while len(values) < dimensions:
        digest = hashlib.sha256(seed + counter.to_bytes(4, "little")).digest()
        values.extend(word / 2147483648.0 - 1.0 for word in _WORDS.unpack(digest))
        counter += 1
    return normalize(values[:dimensions])


def normalize(vector: list[float]) -> list[float]:
    """``vector`` scaled to length 1 (a zero vector stays zero)."""
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0.0:
        return list(vector)
    return [value / norm for value in vector]
