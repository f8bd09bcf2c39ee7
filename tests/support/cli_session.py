"""An ``ollm`` process driven line by line, as a person at a terminal would, in tests.

Its standard input is a pseudo-terminal (so ``ollm chat`` is interactive); its output is
read by threads as it comes, and a test waits for a given text to appear, never for a
time: ``wait_out("> ", count=2)`` returns once the second prompt is printed.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import IO

from cli_helpers import OLLM

# A safety net for a broken build (the test fails instead of hanging), not a deadline.
_STUCK = 120.0


class OutputReader:
    """Everything a stream printed so far, and a way to wait for a text in it."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.text = ""
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            with self._changed:
                self.text += chunk.decode("utf-8", "replace")
                self._changed.notify_all()
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def wait_for(self, text: str, count: int = 1) -> str:
        with self._changed:
            self._changed.wait_for(
                lambda: self.text.count(text) >= count or self._closed, timeout=_STUCK
            )
            assert self.text.count(text) >= count, (
                f"never printed {text!r} {count} time(s); printed so far:\n{self.text}"
            )
            return self.text

    def join(self) -> None:
        self._thread.join(timeout=_STUCK)


class InteractiveOllm:
    """``ollm ARGS`` with a pseudo-terminal for input; ``with`` ends it."""

    def __init__(self, args: Sequence[str], env: dict[str, str]) -> None:
        import pty

        self._leader, follower = pty.openpty()
        self.process = subprocess.Popen(
            [OLLM, *args],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**env, "TERM": "dumb"},
        )
        os.close(follower)
        assert self.process.stdout is not None
        assert self.process.stderr is not None
        self.out = OutputReader(self.process.stdout)
        self.err = OutputReader(self.process.stderr)

    def send(self, line: str) -> None:
        """Type ``line`` and Enter."""
        os.write(self._leader, (line + "\n").encode())

    def exit(self) -> int:
        """Type ``/exit``; the exit code."""
        self.send("/exit")
        code = self.process.wait(timeout=_STUCK)
        self.out.join()
        self.err.join()
        return code

    def __enter__(self) -> InteractiveOllm:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=_STUCK)
        os.close(self._leader)
