"""Reading a GGUF file's header in Python: what a model is, without loading it.

``ollm models list`` describes every file of a folder, and a chat checks a file before
llama.cpp opens it (a file that is not GGUF, or too large for the memory, is refused in
words instead of failing inside the library). The header is read through ``mmap`` with
every offset checked against the file's size, so a truncated or corrupt file is a
``GGUFError`` (a ``ValueError``), never a crash or a read past the end. Numeric arrays
(the tokenizer's scores and types) are skipped, not decoded; string arrays (its
vocabulary) are walked, not kept; arrays of arrays nest at most ``_MAX_NESTING`` deep.

The format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["GGUF_MAGIC", "GGUFError", "GGUFInfo", "is_gguf", "read_gguf"]

GGUF_MAGIC = b"GGUF"
"""The first four bytes of every GGUF file."""

# Value types: (struct format, size) for the fixed-size ones.
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL = range(8)
_STRING, _ARRAY, _UINT64, _INT64, _FLOAT64 = range(8, 13)
_FIXED: dict[int, tuple[str, int]] = {
    _UINT8: ("<B", 1),
    _INT8: ("<b", 1),
    _UINT16: ("<H", 2),
    _INT16: ("<h", 2),
    _UINT32: ("<I", 4),
    _INT32: ("<i", 4),
    _FLOAT32: ("<f", 4),
    _BOOL: ("<?", 1),
    _UINT64: ("<Q", 8),
    _INT64: ("<q", 8),
    _FLOAT64: ("<d", 8),
}
# More keys than any real model has (a few dozen), and more dimensions than ggml allows.
_MAX_KEYS = 100_000
_MAX_TENSORS = 1_000_000
_MAX_DIMS = 8
# Arrays of arrays: real models nest one or two; a file nesting thousands is hostile
# (read recursively, it would end in a RecursionError), refused like other malformed ones.
_MAX_NESTING = 64

# llama.cpp's file types (general.file_type, enum llama_ftype), as its tools name them.
_FILE_TYPES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
}


class GGUFError(ValueError):
    """The file is not a GGUF model, or its header is cut short or malformed."""


class GGUFInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a GGUF file's header says about its model.

    ``metadata`` holds the header's scalar values (numbers, strings, booleans) by key,
    and the length of each array; ``parameters`` is counted from the tensors' shapes.
    """

    path: str
    size_bytes: int
    version: int
    architecture: str | None = None
    name: str | None = None
    quantization: str | None = None
    context_length: int | None = None
    chat_template: str | None = None
    parameters: int | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)

    def arch_value(self, key: str) -> Any:
        """``{architecture}.{key}`` from the metadata (``None`` when absent)."""
        if not self.architecture:
            return None
        return self.metadata.get(f"{self.architecture}.{key}")

    @property
    def embedding(self) -> bool:
        """Whether the model makes embeddings: an encoder with a pooling type."""
        return self.arch_value("pooling_type") is not None

    @property
    def parameter_label(self) -> str | None:
        """The size as a model card writes it: ``268M``, ``7.2B``."""
        label = self.metadata.get("general.size_label")
        if isinstance(label, str) and label:
            return label
        count = self.parameters
        if not count:
            return None
        for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
            if count >= size:
                value = count / size
                return f"{value:.0f}{unit}" if value >= 100 else f"{value:.1f}{unit}"
        return str(count)

    def kv_cache_bytes(self, n_ctx: int) -> int:
        """The memory of a context of ``n_ctx`` tokens (keys and values in 16 bits)."""
        layers = _int(self.arch_value("block_count")) or 0
        heads = _int(self.arch_value("attention.head_count")) or 0
        kv_heads = _first_int(self.arch_value("attention.head_count_kv")) or heads
        width = _int(self.arch_value("embedding_length")) or 0
        key = _int(self.arch_value("attention.key_length")) or (width // heads if heads else 0)
        value = _int(self.arch_value("attention.value_length")) or key
        return 2 * n_ctx * layers * kv_heads * (key + value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _first_int(value: Any) -> int | None:
    # Some architectures give one head count per layer (an array, whose length is kept).
    return _int(value)


def is_gguf(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts with the GGUF magic bytes (``False`` if it cannot be read)."""
    try:
        with open(path, "rb") as file:
            return file.read(4) == GGUF_MAGIC
    except OSError:
        return False


def read_gguf(path: str | os.PathLike[str]) -> GGUFInfo:
    """The header of the GGUF file at ``path``.

    Raises ``GGUFError`` for a file that is not GGUF or whose header is malformed, and
    ``OSError`` for one that cannot be opened.
    """
    file_path = Path(path)
    with open(file_path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        head = file.read(4)
        if head != GGUF_MAGIC:
            raise GGUFError(_not_gguf(head))
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            reader = _Reader(data, size)
            reader.offset = 4
            return reader.header(str(file_path))


def _not_gguf(head: bytes) -> str:
    if not head:
        return "the file is empty"
    if head[:4] == b"ggjt" or head[:4] == b"tjgg" or head[:4] in (b"ggml", b"lmgg"):
        return "it is in GGML's old format, from before GGUF (convert it with llama.cpp)"
    if head[:2] == b"PK":
        return "it is a zip archive (a PyTorch checkpoint?), not a GGUF model"
    if head.startswith(b"{") or head[:1].isspace():
        return "it is a text file, not a GGUF model"
    return f"it starts with {head!r}, not with the GGUF magic bytes b'GGUF'"


class _Reader:
    """Little-endian values at ``offset``, never past ``size``."""

    __slots__ = ("data", "offset", "size")

    def __init__(self, data: mmap.mmap, size: int) -> None:
        self.data = data
        self.size = size
        self.offset = 0

    def _take(self, count: int) -> int:
        start = self.offset
        if count < 0 or start + count > self.size:
            raise GGUFError("the file ends inside its header (it is cut short)")
        self.offset = start + count
        return start

    def fixed(self, kind: int) -> Any:
        fmt, width = _FIXED[kind]
        return struct.unpack_from(fmt, self.data, self._take(width))[0]

    def u32(self) -> int:
        return int(self.fixed(_UINT32))

    def u64(self) -> int:
        return int(self.fixed(_UINT64))

    def string(self) -> str:
        length = self.u64()
        start = self._take(length)
        return bytes(self.data[start : start + length]).decode("utf-8", "replace")

    def skip_string(self) -> None:
        self._take(self.u64())

    def value(self, kind: int) -> Any:
        """A value of type ``kind``: arrays become their length."""
        if kind in _FIXED:
            return self.fixed(kind)
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            return self.array()
        raise GGUFError(f"the header has a value of unknown type {kind}")

    def array(self, depth: int = 1) -> int:
        if depth > _MAX_NESTING:
            raise GGUFError(
                f"its header nests arrays more than {_MAX_NESTING} deep (no model does; "
                "the file is malformed)"
            )
        kind = self.u32()
        count = self.u64()
        if count > self.size:
            raise GGUFError("the file ends inside its header (it is cut short)")
        if kind in _FIXED:
            self._take(count * _FIXED[kind][1])
        elif kind == _STRING:
            for _ in range(count):
                self.skip_string()
        elif kind == _ARRAY:
            for _ in range(count):
                self.array(depth + 1)
        else:
            raise GGUFError(f"the header has an array of unknown type {kind}")
        return count

    def header(self, path: str) -> GGUFInfo:
        version = self.u32()
        if version not in (2, 3):
            if version in (1,) or version > 0xFFFF:
                raise GGUFError(
                    f"it is GGUF version {version if version < 0xFFFF else 'in big-endian'}, "
                    "which llama.cpp no longer reads (convert it again with llama.cpp)"
                )
            raise GGUFError(f"it is GGUF version {version}, which ollm does not know")
        tensors = self.u64()
        keys = self.u64()
        if keys > _MAX_KEYS or tensors > _MAX_TENSORS:
            raise GGUFError("its header claims more keys or tensors than any model has")
        metadata: dict[str, Any] = {}
        for _ in range(keys):
            key = self.string()
            metadata[key] = self.value(self.u32())
        parameters = 0
        for _ in range(tensors):
            self.skip_string()
            dims = self.u32()
            if dims > _MAX_DIMS:
                raise GGUFError(f"a tensor has {dims} dimensions (ggml allows {_MAX_DIMS})")
            count = 1
            for _ in range(dims):
                count *= self.u64()
            self.u32()  # its type
            self.u64()  # its offset in the data
            parameters += count
        return _info(path, self.size, version, metadata, parameters)


def _info(
    path: str, size: int, version: int, metadata: dict[str, Any], parameters: int
) -> GGUFInfo:
    architecture = metadata.get("general.architecture")
    arch = architecture if isinstance(architecture, str) and architecture else None
    file_type = metadata.get("general.file_type")
    context = metadata.get(f"{arch}.context_length") if arch else None
    template = metadata.get("tokenizer.chat_template")
    name = metadata.get("general.name")
    return GGUFInfo(
        path=path,
        size_bytes=size,
        version=version,
        architecture=arch,
        name=name if isinstance(name, str) and name else None,
        quantization=_FILE_TYPES.get(file_type) if isinstance(file_type, int) else None,
        context_length=_int(context),
        chat_template=template if isinstance(template, str) and template.strip() else None,
        parameters=parameters or None,
        metadata=metadata,
    )
