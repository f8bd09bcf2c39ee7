"""Usage errors: said by the command they concern, in its words, with exit code 2."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from cli_helpers import OLLM, ollm_env

import ollm
from ollm.cli.render import EventRenderer
from ollm.cli.terminal import Terminal


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["chat", "--modle", "x"], "ollm chat"),
        (["models", "list", "--modle"], "ollm models list"),
        (["logs", "show", "--modle", "abc"], "ollm logs show"),
        (["plugins", "--modle"], "ollm plugins"),
        (["--modle"], "ollm"),
    ],
)
def test_an_unknown_option_shows_the_usage_of_its_command(args: list[str], command: str) -> None:
    done = subprocess.run(
        [OLLM, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=ollm_env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"usage: {command} [-h]")
    assert done.stderr.splitlines()[-1] == f"{command}: error: unrecognized arguments: --modle"


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("prompt", ["", "   "])
def test_an_empty_prompt_argument_at_a_terminal_is_a_usage_error(prompt: str) -> None:
    """Neither blamed on standard input nor taken as "no prompt" (an interactive session)."""
    import pty

    leader, follower = pty.openpty()
    os.write(leader, b"/exit\n")  # what ends a session, were one started by mistake
    try:
        done = subprocess.run(
            [OLLM, "chat", "-p", "echo", prompt],
            stdin=follower,
            capture_output=True,
            text=True,
            env=ollm_env(TERM="dumb"),
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("error: the prompt is empty (the argument is blank).")
    assert "standard input" not in done.stderr
    assert "Chatting with" not in done.stderr


def test_an_empty_prompt_argument_with_text_piped_in_is_the_text() -> None:
    done = subprocess.run(
        [OLLM, "chat", "-p", "echo", "--no-log", ""],
        input="piped words\n",
        capture_output=True,
        text=True,
        env=ollm_env(),
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, "piped words\n"), done.stderr


def test_an_error_line_carries_its_code_in_text_as_in_json() -> None:
    err = io.StringIO()
    terminal = Terminal(io.StringIO(), err, environ={})
    EventRenderer(terminal)(ollm.ErrorEvent("Model 'x' is not there.", "MODEL_NOT_FOUND"))
    terminal.error("no prompt given.")
    assert err.getvalue() == (
        "error[MODEL_NOT_FOUND]: Model 'x' is not there.\nerror: no prompt given.\n"
    )
