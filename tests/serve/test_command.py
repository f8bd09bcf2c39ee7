"""The ``ollm serve`` command itself: it serves, and SIGTERM lets a running stream finish
before the process ends."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import httpx
from cli_helpers import OLLM, ollm_env

START_LIMIT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def started(port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [OLLM, "serve", "-p", "echo", "--port", str(port), "--grace", "30"],
        env=ollm_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + START_LIMIT
    while True:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            httpx.get(f"http://127.0.0.1:{port}/api/version", timeout=5)
            return process
        except httpx.TransportError:
            assert time.monotonic() < deadline, "ollm serve never answered"
            time.sleep(0.1)


def test_sigterm_lets_a_running_stream_finish() -> None:
    port = free_port()
    process = started(port)
    try:
        # The echo provider streams these pieces a fifth of a second apart.
        script = {"text": ["one ", "two ", "three ", "four ", "five"], "delay": 0.2}
        body = {
            "model": "echo",
            "messages": [{"role": "user", "content": json.dumps(script)}],
            "stream": True,
        }
        lines = []
        with httpx.stream(
            "POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=60
        ) as response:
            for line in response.iter_lines():
                if line:
                    lines.append(line)
                if '"one "' in line:
                    process.send_signal(signal.SIGTERM)
        assert lines[-1] == "data: [DONE]"
        text = "".join(
            json.loads(line[6:])["choices"][0]["delta"].get("content", "")
            for line in lines
            if line.startswith("data: {") and '"choices":[{' in line
        )
        assert text == "one two three four five"
        # Then it ends, by the signal it was given (uvicorn raises it again once drained).
        assert process.wait(timeout=60) in (0, -signal.SIGTERM)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_ollm_help_lists_serve_without_importing_its_server() -> None:
    script = (
        "import contextlib, io, sys\n"
        "from ollm.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    main(['--help'])\n"
        "heavy = [m for m in ('uvicorn', 'ollm_serve._app', 'httpx') if m in sys.modules]\n"
        "print('serve' in out.getvalue(), heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=ollm_env(), capture_output=True, text=True, check=False
    )
    assert done.stdout.strip() == "True []", done.stderr


def test_an_unknown_provider_stops_the_command_before_it_binds() -> None:
    done = subprocess.run(
        [OLLM, "serve", "-p", "nope", "--port", str(free_port())],
        env=ollm_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "PROVIDER_NOT_FOUND" in done.stderr
    assert "'nope' is not installed" in done.stderr
