"""``ollm chat`` asks before a tool call runs: at a terminal (yes, no, always, edit),
refused in one line without one, Ctrl-C while asking runs nothing, every decision is
logged, and a session stopped while asking goes on with ``--cid``."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli_helpers import OLLM, ollm_env
from cli_session import InteractiveOllm
from policy_files import NOT_A_POLICY, UNREADABLE

from ollm_testutils import FakeOllamaServer, OllamaReply

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")

RunOllm = Callable[..., subprocess.CompletedProcess[str]]

TOUCH = '''
import os
import ollm


def touch_file(name: str) -> str:
    """Create a file.

    Args:
        name: Its name.
    """
    with open(os.environ["SIDE_EFFECTS"], "a") as out:
        out.write(name + "\\n")
    return f"created {name}"


@ollm.hookimpl
def ollm_tools():
    return [touch_file]
'''

QUESTION = "run it? [y]es, [n]o, [a]lways in this chat, [e]dit the arguments: "


def touching(*names: str) -> OllamaReply:
    return OllamaReply(tool_calls=[("touch_file", {"name": n}) for n in names])


class Setup:
    """The plugin, the file its tool writes, and the environment of ``ollm``."""

    def __init__(self, tmp_path: Path, server: FakeOllamaServer, plugin_path: Callable[..., str]):
        self.effects = tmp_path / "effects.txt"
        self.logs = tmp_path / "logs.db"
        self.env = ollm_env(
            OLLAMA_HOST=server.url,
            PYTHONPATH=plugin_path("touch", TOUCH),
            SIDE_EFFECTS=str(self.effects),
            OLLM_LOGS_PATH=str(self.logs),
            HOME=str(tmp_path),  # no policy file of the user's
        )

    def created(self) -> list[str]:
        return self.effects.read_text().split() if self.effects.exists() else []

    def run(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [OLLM, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            env=self.env,
        )

    @contextlib.contextmanager
    def asked(self, *args: str, prompt: str = "make a") -> Iterator[InteractiveOllm]:
        """``ollm chat --approve -t touch_file ARGS PROMPT`` at a terminal, once it has
        asked its first question."""
        every = ["chat", "-m", "llama3.2", "--approve", "-t", "touch_file", *args, prompt]
        with InteractiveOllm(every, self.env) as session:
            session.err.wait_for(QUESTION)
            yield session

    def logged(self) -> dict[str, object]:
        listed = json.loads(self.run("logs", "--json").stdout)
        shown = self.run("logs", "show", listed[0]["id"], "--json")
        return dict(json.loads(shown.stdout))


@pytest.fixture
def setup(tmp_path: Path, server: FakeOllamaServer, plugin_path: Callable[..., str]) -> Setup:
    return Setup(tmp_path, server, plugin_path)


def test_without_a_terminal_a_call_to_approve_is_refused_in_one_line_and_the_chat_goes_on(
    setup: Setup, server: FakeOllamaServer
) -> None:
    server.script(touching("a"), OllamaReply("I could not."))
    done = setup.run("chat", "-m", "llama3.2", "--approve", "-t", "touch_file", stdin="make a\n")
    assert done.returncode == 0, done.stderr
    assert setup.created() == []
    notices = [line for line in done.stderr.splitlines() if "touch_file was not run" in line]
    assert len(notices) == 1
    assert (
        "there is no terminal to ask at. To let it run, allow it: --allow touch_file"
        in (notices[0])
    )
    assert done.stdout == "I could not.\n"
    told = server.chat_requests[1].json["messages"][-1]
    assert told["role"] == "tool"
    assert "no terminal to ask at" in told["content"]
    [decision] = setup.logged()["decisions"]  # type: ignore[misc]
    assert (decision["tool"], decision["decision"], decision["by"]) == (
        "touch_file",
        "deny",
        "approver",
    )


def test_at_a_terminal_yes_runs_it_and_the_decision_is_logged(
    setup: Setup, server: FakeOllamaServer
) -> None:
    server.script(touching("a"), OllamaReply("Made."))
    args = ["chat", "-m", "llama3.2", "--ask", "touch_*", "-t", "touch_file", "make a"]
    with InteractiveOllm(args, setup.env) as session:
        session.err.wait_for(QUESTION)
        assert setup.created() == []
        assert 'touch_file(name="a") wants your approval: --ask touch_*' in session.err.text
        session.send("y")
        assert session.process.wait(timeout=120) == 0, session.err.text
        session.out.join()
    assert setup.created() == ["a"]
    assert "Made." in session.out.text
    shown = setup.run("logs", "show", json.loads(setup.run("logs", "--json").stdout)[0]["id"])
    assert '- calls `touch_file({"name":"a"})`' in shown.stdout
    assert "  allowed by person: --ask touch_*" in shown.stdout


def test_at_a_terminal_no_runs_nothing_and_the_model_reads_why(
    setup: Setup, server: FakeOllamaServer
) -> None:
    server.script(touching("a"), OllamaReply("As you wish."))
    with setup.asked() as session:
        session.send("n")
        assert session.process.wait(timeout=120) == 0, session.err.text
        session.out.join()
    assert setup.created() == []
    assert "As you wish." in session.out.text
    told = server.chat_requests[1].json["messages"][-1]
    assert (told["role"], told["content"]) == (
        "tool",
        "Tool 'touch_file' was not run: the person at the terminal said no",
    )
    [decision] = setup.logged()["decisions"]  # type: ignore[misc]
    assert (decision["decision"], decision["by"]) == ("deny", "person")


def test_always_asks_once_and_edit_changes_the_arguments(
    setup: Setup, server: FakeOllamaServer
) -> None:
    server.script(touching("a", "b"), touching("c"), OllamaReply("All made."))
    with setup.asked(prompt="make them") as session:
        session.send("e")
        session.err.wait_for("(a JSON object; empty to go back): ")
        session.send('{"name": "a2"}')
        session.err.wait_for(QUESTION, count=2)
        session.send("a")
        assert session.process.wait(timeout=120) == 0, session.err.text
        session.err.join()
    assert session.err.text.count(QUESTION) == 2  # "always" answered the third call too
    created = setup.created()
    # a2 and b run at once (a2 from its approval on, while b is asked): either may be first.
    assert (sorted(created[:2]), created[2:]) == (["a2", "b"], ["c"])
    logged = setup.logged()
    by = [(d["args"], d["by"], d.get("scope")) for d in logged["decisions"]]  # type: ignore[attr-defined]
    assert by == [
        ('{"name":"a2"}', "person", "once"),
        ('{"name":"b"}', "person", "chat"),
        (
            '{"name":"c"}',
            "chat",
            "chat",
        ),
    ]
    first_call = logged["messages"][1]["tool_calls"][0]  # type: ignore[index]
    assert (first_call["args"], first_call["original_args"]) == ({"name": "a2"}, {"name": "a"})


def test_ctrl_c_while_asking_runs_nothing_and_exits_130(
    setup: Setup, server: FakeOllamaServer
) -> None:
    server.script(touching("a"), OllamaReply("never"))
    with setup.asked() as session:
        session.process.send_signal(signal.SIGINT)
        assert session.process.wait(timeout=120) == 130
        session.err.join()
    assert setup.created() == []
    assert "Traceback" not in session.err.text
    assert len(server.chat_requests) == 1


def test_a_session_stopped_while_asking_is_asked_again_with_cid(
    setup: Setup, server: FakeOllamaServer
) -> None:
    server.script(touching("a"), OllamaReply("Made, at last."))
    with setup.asked() as session:
        session.process.kill()  # stopped hard: no chance to log anything more
        session.process.wait(timeout=120)
    assert setup.created() == []
    cid = json.loads(setup.run("logs", "--json").stdout)[0]["id"]
    again = ["chat", "--cid", cid, "--approve", "-t", "touch_file"]
    with InteractiveOllm(again, setup.env) as session:
        session.err.wait_for(QUESTION)
        assert "1 tool call(s) were never answered" in session.err.text
        session.send("y")
        session.out.wait_for("Made, at last.")
        session.out.wait_for("> ")
        assert session.exit() == 0, session.err.text
    assert setup.created() == ["a"]
    sent = [m["role"] for m in server.chat_requests[1].json["messages"]]
    assert sent == ["user", "assistant", "tool"]
    roles = [m["role"] for m in setup.logged()["messages"]]  # type: ignore[attr-defined]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_a_policy_file_denies_and_a_flag_allows(
    setup: Setup, server: FakeOllamaServer, tmp_path: Path
) -> None:
    policy = tmp_path / ".config" / "ollm" / "policy.toml"
    policy.parent.mkdir(parents=True)
    policy.write_text('[[rules]]\naction = "deny"\ntool = "touch_*"\nreason = "no files"\n')
    server.script(touching("a"), OllamaReply("Refused."), touching("b"), OllamaReply("Made."))
    refused = setup.run("chat", "-m", "llama3.2", "-t", "touch_file", "make a")
    assert refused.returncode == 0, refused.stderr
    assert "touch_file was not run: no files" in refused.stderr
    assert setup.created() == []
    # A deny wins over an allow: only the file's own words change that.
    policy.write_text('default = "deny"\n')
    allowed = setup.run("chat", "-m", "llama3.2", "-t", "touch_file", "--allow", "touch_*", "b")
    assert allowed.returncode == 0, allowed.stderr
    assert setup.created() == ["b"]


def test_a_broken_policy_file_is_an_error_that_names_it(setup: Setup, tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('default = "sometimes"\n')
    setup.env["OLLM_POLICY"] = str(policy)
    done = setup.run("chat", "-p", "echo", "-t", "touch_file", "hi")
    assert done.returncode == 2
    assert (
        f'error[POLICY_INVALID]: The approval policy {policy}: default must be "allow", "ask" '
        'or "deny"' in done.stderr
    )


def test_a_deny_flag_wins_over_an_allow_flag(setup: Setup, server: FakeOllamaServer) -> None:
    server.script(touching("a"), OllamaReply("Refused."))
    args = ["-t", "touch_file", "--allow", "touch_*", "--deny", "touch_file", "make a"]
    done = setup.run("chat", "-m", "llama3.2", *args)
    assert done.returncode == 0, done.stderr
    assert setup.created() == []
    assert "touch_file was not run: --deny touch_file" in done.stderr


@pytest.mark.parametrize(("make", "said"), UNREADABLE + NOT_A_POLICY)
@pytest.mark.parametrize("how", ["OLLM_POLICY", "--policy"])
def test_a_named_policy_that_cannot_be_read_stops_the_chat_before_the_model(
    setup: Setup,
    server: FakeOllamaServer,
    tmp_path: Path,
    make: Callable[[Path], Path],
    said: str,
    how: str,
) -> None:
    path = make(tmp_path)
    server.script(touching("a"), OllamaReply("Made."))
    flags = ["--policy", str(path)] if how == "--policy" else []
    if how == "OLLM_POLICY":
        setup.env["OLLM_POLICY"] = str(path)
    done = setup.run("chat", "-m", "llama3.2", "-t", "touch_file", *flags, "make a")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error[POLICY_INVALID]: The approval policy {path}")
    assert said in line
    assert not server.chat_requests
    assert setup.created() == []
    # Named, it is read even when no tool is offered: the typo is said at once.
    plain = setup.run("chat", "-m", "llama3.2", *flags, "hello")
    assert plain.returncode == 2
    assert plain.stderr.startswith("error[POLICY_INVALID]")
    assert not server.chat_requests


def test_the_default_policy_file_counts_when_it_is_there(
    setup: Setup, server: FakeOllamaServer, tmp_path: Path
) -> None:
    server.script(touching("a"), OllamaReply("Made."))
    # None at all: no policy, the call runs.
    done = setup.run("chat", "-m", "llama3.2", "-t", "touch_file", "make a")
    assert done.returncode == 0, done.stderr
    assert setup.created() == ["a"]
    # Something there that cannot be read (a dangling link): the chat stops.
    folder = tmp_path / ".config" / "ollm"
    folder.mkdir(parents=True)
    (folder / "policy.toml").symlink_to(tmp_path / "gone.toml")
    stopped = setup.run("chat", "-m", "llama3.2", "-t", "touch_file", "make b")
    assert stopped.returncode == 2
    assert "error[POLICY_INVALID]" in stopped.stderr
    assert setup.created() == ["a"]
    assert len(server.chat_requests) == 2


def test_approve_asks_by_default_and_an_allow_wins_over_it(
    setup: Setup, server: FakeOllamaServer
) -> None:
    server.script(touching("a"), OllamaReply("Made."))
    allowed = setup.run(
        "chat", "-m", "llama3.2", "--approve", "--allow", "touch_*", "-t", "touch_file", "make a"
    )
    assert allowed.returncode == 0, allowed.stderr
    assert setup.created() == ["a"]
    assert "was not run" not in allowed.stderr


def test_a_refusal_never_suggests_a_flag_already_given(
    setup: Setup, server: FakeOllamaServer
) -> None:
    server.script(touching("a"), OllamaReply("I could not."))
    args = ["--allow", "touch_file", "--ask", "touch_*", "-t", "touch_file", "make a"]
    done = setup.run("chat", "-m", "llama3.2", *args)
    assert done.returncode == 0, done.stderr
    assert setup.created() == []
    [notice] = [line for line in done.stderr.splitlines() if "touch_file was not run" in line]
    assert "--allow touch_file" not in notice
    assert "The rule ask touch_* asks whatever an allow rule says" in notice
    # Asked by --approve alone, --allow is what lets it run: that is said.
    server.script(touching("b"), OllamaReply("I could not."))
    approve = setup.run("chat", "-m", "llama3.2", "--approve", "-t", "touch_file", "make b")
    assert "To let it run, allow it: --allow touch_file" in approve.stderr


def test_an_edit_at_the_terminal_that_a_rule_denies_does_not_run(
    setup: Setup, server: FakeOllamaServer, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rules]]\naction = "deny"\ntool = "touch_*"\nargs = { name = "/etc/*" }\n'
        'reason = "not in /etc"\n'
    )
    setup.env["OLLM_POLICY"] = str(policy)
    server.script(touching("a"), OllamaReply("Refused, then."))
    with setup.asked() as session:
        session.send("e")
        session.err.wait_for("(a JSON object; empty to go back): ")
        session.send('{"name": "/srv/../etc/passwd"}')
        assert session.process.wait(timeout=120) == 0, session.err.text
        session.err.join()
    assert setup.created() == []
    assert "touch_file was not run: the edited arguments are not allowed: not in /etc" in (
        session.err.text
    )
    told = server.chat_requests[1].json["messages"][-1]
    assert "the edited arguments are not allowed: not in /etc" in told["content"]
    decisions = [(d["decision"], d["by"]) for d in setup.logged()["decisions"]]  # type: ignore[attr-defined]
    assert decisions == [("allow", "person"), ("deny", "rule")]
