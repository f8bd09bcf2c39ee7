"""SyncChatClient in real processes: exit without close, Ctrl-C while iterating.

Each script runs in its own interpreter, because what is tested is the interpreter's
exit and its SIGINT handling. The timeouts below only detect a hang (a hung
interpreter is the bug); no test measures how fast anything is.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

HANG = 60  # seconds after which a child is a hung child (the bug), never a timing claim

pytestmark = pytest.mark.parametrize("backend", ["asyncio", "trio"])

PRELUDE = """
import json, os, signal, sys, threading
import ollm
from ollm_testutils.mock import Reply, ScriptedProvider

def make(*replies, backend):
    provider = ScriptedProvider(*replies)
    return ollm.SyncChatClient(
        ollm.ChatClient(ollm.Registries(), provider=provider), backend=backend
    ), provider
"""


def run_script(body: str, backend: str) -> subprocess.CompletedProcess[str]:
    script = PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script, backend],
        capture_output=True,
        text=True,
        timeout=HANG,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_a_client_never_closed_lets_the_program_exit(backend: str) -> None:
    done = run_script(
        """
        client, provider = make(Reply("hello"), backend=sys.argv[1])
        print(client.run("hi").text)
        kept = client  # a variable keeps it alive until the interpreter ends
        """,
        backend,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello"
    assert "Traceback" not in done.stderr


def test_a_client_dropped_without_close_stops_its_loop(backend: str) -> None:
    done = run_script(
        """
        import gc
        client, provider = make(Reply("hello"), backend=sys.argv[1])
        client.run("hi")
        loops = lambda: [t for t in threading.enumerate() if t.name == "ollm-sync-loop"]
        print(len(loops()))
        del client
        gc.collect()
        print(len(loops()), provider.open_streams)
        """,
        backend,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0", "0"]


def test_close_is_idempotent_and_a_closed_client_says_so(backend: str) -> None:
    done = run_script(
        """
        client, provider = make(Reply("hello"), backend=sys.argv[1])
        client.run("hi")
        client.close()
        client.close()
        with client:
            pass
        print("closed twice")
        """,
        backend,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "closed twice"


def test_ctrl_c_while_iterating_aborts_keeps_the_history_and_the_client_usable(
    backend: str,
) -> None:
    done = run_script(
        """
        client, provider = make(
            Reply(["partial ", "reply"], hang=True), Reply("again"), backend=sys.argv[1]
        )
        seen = []
        try:
            for event in client.chat("first"):
                if isinstance(event, ollm.TextEvent):
                    seen.append(event.text)
                    if len(seen) == 2:
                        # Ctrl-C while the main thread waits for the next event.
                        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
        last = client.conversation.messages[-1]
        print(json.dumps([last.role, last.text, last.incomplete]))
        print(client.run("second").text)
        client.close()
        print(provider.open_streams)
        """,
        backend,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "KeyboardInterrupt"
    assert json.loads(lines[1]) == ["assistant", "partial reply", True]
    assert lines[2:] == ["again", "0"]


def test_a_second_ctrl_c_is_not_needed_to_exit(backend: str) -> None:
    """SIGINT to a program that ends with an unclosed client mid-chat exits it at once."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PRELUDE
            + textwrap.dedent(
                """
                client, provider = make(Reply("x", hang=True), backend=sys.argv[1])
                for event in client.chat("hang"):
                    print("started", flush=True)
                """
            ),
            backend,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "started"
        child.send_signal(signal.SIGINT)
        child.wait(timeout=HANG)
    finally:
        child.kill()
    assert child.returncode != 0
    stderr = child.stderr.read() if child.stderr else ""
    assert "KeyboardInterrupt" in stderr
    assert "RuntimeError" not in stderr
