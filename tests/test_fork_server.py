"""The tests' ``ollm`` through the fork server (tests/support/fork_server.py) is the real
``ollm``: for each command here both give the same output, errors and exit status, and
the client's death, its signals and a child's crash reach the child as they would reach
the real process."""

from __future__ import annotations

import contextlib
import os
import pty
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import OLLM, OLLM_REAL, fork_server_on, installed_plugin, ollm_env
from log_helpers import ollm

pytestmark = pytest.mark.skipif(
    not fork_server_on() or sys.platform != "linux", reason="the fork server is off"
)

# A provider that says a word and then waits for ever (until cancelled), or (by model)
# dies of SIGKILL, or prints to stdout and stderr, or tells its folder, umask
# and ollm's variables: installed by PYTHONPATH, as the tests install plugins.
SLEEPER = """
import os, signal, sys
import anyio
import ollm
from ollm.hookspecs import hookimpl


class Sleeper:
    name = "sleeper"
    default_model = "sleeper"

    async def chat_stream(self, request):
        if request.model == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if request.model == "order":  # stdout unflushed, then stderr flushed
            print("out")
            print("err", file=sys.stderr, flush=True)
            yield ollm.TextEvent("done")
            return
        if request.model == "where":
            umask = os.umask(0)
            names = sorted(name for name in os.environ if name.startswith("OLLM_"))
            yield ollm.TextEvent(f"{os.getcwd()} {umask:o} {' '.join(names)}")
            return
        yield ollm.TextEvent("waiting\\n")
        await anyio.sleep_forever()


@hookimpl
def ollm_providers():
    return [ollm.ProviderSpec(name="sleeper", factory=Sleeper, description="waits")]
"""

Outcome = tuple[int, str, str]
Popen = subprocess.Popen[str]


@pytest.fixture
def sleeper(tmp_path: Path) -> str:
    """A PYTHONPATH on which the plugin ``sleeper`` is installed."""
    (tmp_path / "sleeper_plugin.py").write_text(SLEEPER)
    return installed_plugin(tmp_path, "sleeper", "sleeper_plugin", tmp_path)


def both(*args: str, stdin: str | None = None, **env: str) -> Iterator[Outcome]:
    """``ollm ARGS`` run by the fork server, then by the real command."""
    for command in (OLLM, OLLM_REAL):
        done = ollm(None, *args, stdin=stdin, command=command, **env)
        yield done.returncode, done.stdout, done.stderr


def test_the_client_is_the_fork_server() -> None:
    assert OLLM != OLLM_REAL
    assert Path(OLLM).read_text().startswith(f"#!{sys.executable} -IS\n")


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (["--version"], None),
        (["chat", "-p", "echo", "--no-log", "hello there"], None),
        (["--backend", "trio", "chat", "-p", "echo", "--no-log", "hello there"], None),
        (["chat", "--no-such-option", "hi"], None),  # a usage error: exit 2
        (["models"], None),  # no action: help on stderr, exit 2
        (["chat", "-p", "echo", "--no-log"], "a prompt on stdin\n"),
        (["chat", "-p", "nosuch", "--no-log", "hi"], None),  # exit 1, in words
        (["tools"], None),
    ],
)
def test_a_command_gives_what_the_real_one_gives(args: list[str], stdin: str | None) -> None:
    forked, real = both(*args, stdin=stdin)
    assert forked == real
    assert "Traceback" not in forked[2]


def test_the_arguments_that_are_not_text_arrive_as_bytes() -> None:
    word = os.fsdecode(b"caf\xe9")  # not UTF-8: a surrogate escape, as an OS gives it
    forked, real = both("chat", "-p", "echo", "--no-log", word)
    assert forked == real
    assert "\ufffd" in forked[1]


def test_the_environment_is_the_callers(tmp_path: Path) -> None:
    """The child's environment is the caller's, whole: set, changed and removed."""
    first, second = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    outcomes = [list(both("logs", "path", OLLM_LOGS_PATH=path)) for path in (first, second)]
    for (forked, real), path in zip(outcomes, (first, second), strict=True):
        assert forked == real
        assert forked[1].strip() == path
    # Without OLLM_LOGS_PATH, XDG_DATA_HOME decides.
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "OLLM_LOGS_PATH": ""}
    forked, real = both("logs", "path", **env)
    assert forked == real
    assert forked[1].strip().startswith(str(tmp_path / "data"))


@pytest.mark.parametrize("no_color", [True, False])
def test_colour_follows_the_terminal_and_no_color(no_color: bool) -> None:
    """On a terminal, errors are in colour unless NO_COLOR is set: the child's stderr is
    the caller's terminal, and the environment the caller's."""
    env = ollm_env()
    if not no_color:
        del env["NO_COLOR"]
    seen = []
    for command in (OLLM, OLLM_REAL):
        leader, follower = pty.openpty()
        with subprocess.Popen(
            [command, "chat", "-p", "nosuch", "--no-log", "hi"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
            env=env,
        ) as process:
            os.close(follower)
            assert process.stdout is not None
            stdout = process.stdout.read()
            process.wait(timeout=120)
        seen.append((process.returncode, stdout, _read_to_the_end(leader)))
    assert seen[0] == seen[1]
    assert (b"\x1b[" in seen[0][2]) is not no_color


def _read_to_the_end(reader: int) -> bytes:
    data = b""
    try:
        while chunk := os.read(reader, 1 << 16):
            data += chunk
    except OSError:  # a terminal's EIO: the other side is closed, everything was read
        pass
    finally:
        os.close(reader)
    return data


def test_a_plugin_installed_by_pythonpath_is_found(sleeper: str) -> None:
    forked, real = both("plugins", PYTHONPATH=sleeper)
    assert forked == real
    assert "ollm-sleeper" in forked[1]


def _hangup_as_default() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@contextlib.contextmanager
def chatting(
    command: str, sleeper: str, model: str = "sleeper", backend: str = "asyncio"
) -> Iterator[Popen]:
    """``ollm chat -p sleeper``, once it has said its word (the chat is under way);
    killed at the end if still running."""
    process = subprocess.Popen(
        [command, "--backend", backend, "chat", "-p", "sleeper", "-m", model, "--no-log", "hi"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ollm_env(PYTHONPATH=sleeper),
        # As a terminal starts it: under nohup (a CI runner's, say) SIGHUP is ignored, and
        # an ignored signal stays ignored through exec, and through the fork server alike.
        preexec_fn=_hangup_as_default,
    )
    with process:
        try:
            assert process.stdout is not None
            if model != "crash":
                assert process.stdout.readline() == "waiting\n"
            yield process
        finally:
            process.kill()  # (nothing if it has ended)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_ctrl_c_mid_chat_ends_it_as_the_real_one_does(sleeper: str, backend: str) -> None:
    seen = []
    for command in (OLLM, OLLM_REAL):
        with chatting(command, sleeper, backend=backend) as process:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=120)
        seen.append((process.returncode, out, err))
    assert seen[0] == seen[1]
    assert seen[0][0] == 130


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_that_kills_kills_the_child_and_the_client_dies_of_it(
    sleeper: str, signum: int
) -> None:
    """As a shell sees it: the client dies of the signal its child died of."""
    for command in (OLLM, OLLM_REAL):
        with chatting(command, sleeper) as process:
            process.send_signal(signum)
            # The end of stdout: the child (who holds it too) is gone as well.
            out, _ = process.communicate(timeout=120)
        assert (process.returncode, out) == (-signum, "")


def test_a_killed_client_takes_its_child_with_it(sleeper: str) -> None:
    with chatting(OLLM, sleeper) as process:
        process.kill()
        # The child holds stdout too: its end means the child is gone (else a hang,
        # which the timeout turns into a failure).
        out, _ = process.communicate(timeout=120)
    assert (process.returncode, out) == (-signal.SIGKILL, "")


def test_a_child_that_dies_of_a_signal_is_reported_as_such(sleeper: str) -> None:
    for command in (OLLM, OLLM_REAL):
        with chatting(command, sleeper, model="crash") as process:
            process.communicate(timeout=120)
        assert process.returncode == -signal.SIGKILL


def test_the_folder_the_umask_and_the_environment_are_the_callers(
    tmp_path: Path, sleeper: str
) -> None:
    outcomes = []
    for command in (OLLM, OLLM_REAL):
        done = subprocess.run(
            [command, "chat", "-p", "sleeper", "-m", "where", "--no-log", "hi"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            umask=0o027,
            env=ollm_env(PYTHONPATH=sleeper),
        )
        outcomes.append((done.returncode, done.stdout, done.stderr))
    assert outcomes[0] == outcomes[1]
    folder, umask, *names = outcomes[0][1].split()
    assert (folder, umask) == (str(tmp_path), "27")
    assert "OLLM_LOGS_PATH" in names
    assert "OLLM_FORK_SERVER" not in names  # the server's own


@pytest.mark.parametrize(
    ("on_a_terminal", "unbuffered"), [(False, True), (False, False), (True, False)]
)
def test_stdout_buffers_as_a_fresh_interpreters(
    sleeper: str, on_a_terminal: bool, unbuffered: bool
) -> None:
    """A line printed with no flush, then one on stderr, on one stream: the first shows
    first on a terminal (line buffering) or under PYTHONUNBUFFERED, else last. The child's
    stdout is made for the caller's stream and environment, not the server's own."""
    env = ollm_env(PYTHONPATH=sleeper)
    if not unbuffered:
        del env["PYTHONUNBUFFERED"]
    seen = []
    for command in (OLLM, OLLM_REAL):
        reader, writer = pty.openpty() if on_a_terminal else os.pipe()
        with subprocess.Popen(
            [command, "chat", "-p", "sleeper", "-m", "order", "--no-log", "hi"],
            stdin=subprocess.DEVNULL,
            stdout=writer,
            stderr=writer,
            env=env,
        ) as process:
            os.close(writer)
            seen.append(_read_to_the_end(reader))
            process.wait(timeout=120)
    assert seen[0] == seen[1]
    assert (seen[0].index(b"out") < seen[0].index(b"err")) is (on_a_terminal or unbuffered)


def test_an_interpreter_setting_of_the_caller_holds() -> None:
    """PYTHONIOENCODING (read once, at an interpreter's start): a child unlike the server
    in it runs the real ollm, whose stdout then writes Latin-1."""
    seen = []
    for command in (OLLM, OLLM_REAL):
        done = subprocess.run(
            [command, "chat", "-p", "echo", "--no-log", "café"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
            env=ollm_env(PYTHONIOENCODING="latin-1"),
        )
        seen.append((done.returncode, done.stdout, done.stderr))
    assert seen[0] == seen[1]
    assert seen[0][1] == b"caf\xe9\n"


def test_without_a_server_the_client_runs_the_real_ollm(tmp_path: Path) -> None:
    """A client beside no server (one gone, a folder deleted) execs the real command."""
    alone = tmp_path / "ollm"
    alone.write_text(Path(OLLM).read_text())
    alone.chmod(0o755)
    outcomes = []
    for command in (str(alone), OLLM_REAL):
        done = ollm(None, "chat", "-p", "echo", "--no-log", "alone", command=command)
        outcomes.append((done.returncode, done.stdout, done.stderr))
    assert outcomes[0] == outcomes[1] == (0, "alone\n", "")
