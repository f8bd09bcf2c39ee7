"""Internal: warm conversations: a conversation's llama.cpp state (its KV cache), saved
after each reply and restored before the next one, in this process or the next.

A turn of ``ollm chat -c`` in a new process would otherwise read the whole history
again before its first token. The state of each conversation is kept in a file of the
cache folder, named from the conversation's id and the model file's identity (its
path, size and modification time, the context size and the llama.cpp build), and
whose header repeats them with the tokens the state holds.

A state is used only when everything in its header matches the loaded model, and only
for the tokens the new prompt shares with it from the start: llama.cpp drops the rest
of the cache before it reads the new tokens, so a changed history costs time, never a
wrong answer. A file that cannot be read, or that llama.cpp refuses, is ignored (and
the context is cleared). The folder has a size limit: the least recently used files go
first.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ollm_llamacpp._engine import common_prefix

if TYPE_CHECKING:
    from ollm_llamacpp._engine import Engine

__all__ = ["StateCache", "StateKey"]

log = logging.getLogger(__name__)

_MAGIC = b"ollm-llamacpp-state/1\n"
_SUFFIX = ".state"


class StateKey(msgspec.Struct, frozen=True):
    """What a saved state must match: the conversation and the model as loaded."""

    conversation: str
    model: str
    size: int
    mtime_ns: int
    n_ctx: int
    build: str

    @classmethod
    def of(cls, conversation: str, engine: Engine) -> StateKey | None:
        """The key of ``conversation`` on ``engine``'s model, or ``None`` when the file
        cannot be described (nothing is saved or used then)."""
        import llama_cpp

        try:
            stat = os.stat(engine.info.path)
        except OSError:
            return None
        return cls(
            conversation,
            os.path.realpath(engine.info.path),
            stat.st_size,
            stat.st_mtime_ns,
            engine.n_ctx,
            str(llama_cpp.__version__),
        )

    @property
    def file_name(self) -> str:
        digest = hashlib.sha256(
            "\0".join((self.conversation, self.model, str(self.size), str(self.mtime_ns))).encode()
        ).hexdigest()
        return f"{digest[:40]}{_SUFFIX}"

    def matches(self, header: _Header) -> bool:
        key = msgspec.structs.astuple(self)
        return msgspec.structs.astuple(header)[: len(key)] == key


class _Header(StateKey, frozen=True):
    """A state file's second line: its key, and the tokens the state holds."""

    tokens: list[int] = msgspec.field(default_factory=list)


class StateCache:
    """The folder of saved states, at most ``limit`` bytes. Its methods block: they
    run in the provider's worker thread, with the model's lock held."""

    def __init__(self, folder: Path, limit: int) -> None:
        self.folder = folder
        self.limit = limit
        self.saved = 0
        self.restored = 0

    def restore(self, engine: Engine, key: StateKey, prompt: list[int]) -> int:
        """Load ``key``'s state into ``engine`` when it holds more of ``prompt`` than the
        context does now; the prompt tokens it holds (0: nothing was loaded)."""
        path = self.folder / key.file_name
        try:
            with path.open("rb") as file:
                if file.readline() != _MAGIC:
                    return 0
                header = msgspec.json.decode(file.readline(), type=_Header)
                if not key.matches(header):
                    log.debug("a state for another model or build: ignored (%s)", path)
                    return 0
                shared = common_prefix(header.tokens, prompt)
                if shared <= engine.cached_prefix(prompt) or shared == 0:
                    return 0  # the context already holds as much: nothing to gain
                data = file.read()
        except (OSError, ValueError, msgspec.DecodeError):
            return 0
        if not engine.load_state(data, header.tokens):
            log.debug("llama.cpp refused the state in %s: ignored", path)
            return 0
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: the last to be evicted
        self.restored += 1
        return shared

    def save(self, engine: Engine, key: StateKey) -> None:
        """Save ``engine``'s state as ``key``'s (nothing when it is past the limit)."""
        got = engine.save_state()
        if got is None:
            return
        data, tokens = got
        header = _Header(**msgspec.structs.asdict(key), tokens=tokens)
        head = _MAGIC + msgspec.json.encode(header) + b"\n"
        if len(head) + len(data) > self.limit:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / key.file_name
            partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
            with partial.open("wb") as file:
                file.write(head)
                file.write(data)
            os.replace(partial, path)
        except OSError as exc:
            log.debug("the state could not be saved: %s", exc)
            return
        self.saved += 1
        self._evict()

    def _evict(self) -> None:
        """Remove the least recently used states until the folder is within the limit."""
        files: list[tuple[int, int, Path]] = []
        for path in self.folder.glob(f"*{_SUFFIX}"):
            try:
                stat = path.stat()
            except OSError:
                continue
            files.append((stat.st_mtime_ns, stat.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.limit:
                return
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
