"""GGUF files for the tests: a real model with its header changed, a header alone, sparse.

``rewrite_gguf(source, target, changes)`` copies a GGUF file with some of its metadata
set to new string values (a key that is not there is added): an architecture llama.cpp
does not know, a chat template for a model that has none. The tensors are copied as
they are; only the padding before them changes with the header's length. Written from
the format's description (ggml's docs/gguf.md), independently of ollm_llamacpp's reader.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import BinaryIO

_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


def _u32(file: BinaryIO) -> int:
    return int(struct.unpack("<I", file.read(4))[0])


def _u64(file: BinaryIO) -> int:
    return int(struct.unpack("<Q", file.read(8))[0])


def _skip_value(file: BinaryIO, kind: int) -> None:
    if kind in _SIZES:
        file.seek(_SIZES[kind], 1)
    elif kind == _STRING:
        file.seek(_u64(file), 1)
    elif kind == _ARRAY:
        inner, count = _u32(file), _u64(file)
        if inner in _SIZES:
            file.seek(_SIZES[inner] * count, 1)
        else:
            for _ in range(count):
                _skip_value(file, inner)
    else:
        raise ValueError(f"unknown GGUF type {kind}")


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def rewrite_gguf(source: Path, target: Path, changes: dict[str, str]) -> Path:
    """``source`` copied to ``target`` with the string metadata of ``changes``."""
    with open(source, "rb") as file:
        magic, version = file.read(4), _u32(file)
        tensors, count = _u64(file), _u64(file)
        entries: list[tuple[str, bytes]] = []
        alignment = 32
        for _ in range(count):
            key = file.read(_u64(file)).decode()
            kind = _u32(file)
            start = file.tell()
            if key == "general.alignment":
                alignment = _u32(file)
                file.seek(start)
            _skip_value(file, kind)
            end = file.tell()
            file.seek(start)
            entries.append((key, struct.pack("<I", kind) + file.read(end - start)))
        infos_start = file.tell()
        for _ in range(tensors):
            file.seek(_u64(file), 1)
            dims = _u32(file)
            file.seek(8 * dims + 4 + 8, 1)
        infos = (infos_start, file.tell())
        data_start = -(-infos[1] // alignment) * alignment
        file.seek(infos[0])
        tensor_infos = file.read(infos[1] - infos[0])
        values = dict(entries)
        for key, value in changes.items():
            values[key] = struct.pack("<I", _STRING) + _string(value)
        header = magic + struct.pack("<IQQ", version, tensors, len(values))
        header += b"".join(_string(key) + value for key, value in values.items())
        header += tensor_infos
        header += b"\0" * (-len(header) % alignment)
        with open(target, "wb") as out:
            out.write(header)
            file.seek(data_start)
            shutil.copyfileobj(file, out, 1 << 20)
    return target


def header_only(source: Path, target: Path, size: int) -> Path:
    """The first 16 MiB of ``source`` (its whole header), as a sparse file of ``size``
    bytes: a model as large as asked for that takes no room on disk."""
    with open(source, "rb") as file:
        head = file.read(16 << 20)
    with open(target, "wb") as out:
        out.write(head)
        out.truncate(size)
    return target
