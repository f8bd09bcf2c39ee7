"""A policy file that cannot be read or understood is a ``PolicyError``
(``POLICY_INVALID``), never a silent default: missing, a folder, a dangling symbolic
link, a loop of them, a FIFO (refused without waiting for a writer), unreadable, too
large, not UTF-8, not TOML, or with keys and values a policy does not take."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from policy_files import UNREADABLE, fifo

import ollm

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX links and FIFOs")


@posix_only
# The FIFO below, with a writer waiting: with none, a reader that waits would hang.
@pytest.mark.parametrize(("make", "said"), [case for case in UNREADABLE if case[0] is not fifo])
def test_a_file_that_cannot_be_read_is_a_policy_error(
    tmp_path: Path, make: Callable[[Path], Path], said: str
) -> None:
    path = make(tmp_path)
    with pytest.raises(ollm.PolicyError) as caught:
        ollm.ApprovalPolicy.from_file(path)
    assert caught.value.code == "POLICY_INVALID"
    assert caught.value.message.startswith(f"The approval policy {path} ")
    assert said in caught.value.message
    assert "\n" not in caught.value.message
    # Still an InvalidRequestError, as every policy mistake was.
    assert isinstance(caught.value, ollm.InvalidRequestError)


@posix_only
@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads anything")
def test_an_unreadable_file_is_a_policy_error(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('default = "allow"\n')
    path.chmod(0)
    with pytest.raises(ollm.PolicyError, match="cannot be opened"):
        ollm.ApprovalPolicy.from_file(path)


@posix_only
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "policy.toml"
    os.mkfifo(fifo)
    # A writer ready with a policy that allows everything: a reader that opened the
    # FIFO and waited would get it. The policy must be refused, not read.
    wrote = threading.Event()

    def writer() -> None:
        fd = os.open(fifo, os.O_WRONLY)  # waits for a reader
        try:
            os.write(fd, b'default = "allow"\n')
        except BrokenPipeError:
            pass
        finally:
            os.close(fd)
            wrote.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        with pytest.raises(ollm.PolicyError, match="is not a regular file"):
            ollm.ApprovalPolicy.from_file(fifo)
    finally:
        # Let the writer finish whatever happened: a reader of our own releases it.
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        wrote.wait()
        os.close(reader)
        thread.join()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("default = ", "is not valid TOML"),
        ("defaults = 'deny'", "has 'defaults', which a policy does not take"),
        ("default = 1", 'default must be "allow", "ask" or "deny", not 1'),
        ("[[rules]]\naction = 'deny'\ntool = 3", "rule 1: tool must be a name or a glob"),
        ("[[rules]]\naction = 'deny'\nreason = 3", "rule 1: reason must be text"),
        ("rules = { action = 'deny' }", "rules must be [[rules]] tables"),
    ],
)
def test_a_file_that_is_not_a_policy_is_a_policy_error(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    with pytest.raises(ollm.PolicyError) as caught:
        ollm.ApprovalPolicy.from_file(path)
    assert caught.value.code == "POLICY_INVALID"
    assert caught.value.message.startswith(f"The approval policy {path}")
    assert said in caught.value.message
