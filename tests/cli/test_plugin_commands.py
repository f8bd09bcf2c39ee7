"""``ollm_commands``: a plugin's sub-command, listed by ``ollm --help``, costing nothing
until it runs, on the chosen async backend; broken ones never break ``ollm``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_helpers import OLLM, installed_plugin, ollm_env

SUPPORT = Path(__file__).resolve().parents[1] / "support"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    path = installed_plugin(tmp_path, "commands", "command_plugin", SUPPORT)
    return ollm_env(PYTHONPATH=path, COMMAND_PLUGIN_TRACE=str(tmp_path / "trace"))


def ollm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [OLLM, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def trace(env: dict[str, str]) -> list[str]:
    path = Path(env["COMMAND_PLUGIN_TRACE"])
    return path.read_text().splitlines() if path.exists() else []


def test_help_lists_a_plugins_command_without_configuring_it(env: dict[str, str]) -> None:
    done = ollm(env, "--help")
    assert done.returncode == 0, done.stderr
    assert "greet" in done.stdout
    assert "say hello" in done.stdout
    assert "name the async backend" in done.stdout
    assert trace(env) == ["hook"]


def test_a_plugins_command_runs_with_its_arguments(env: dict[str, str]) -> None:
    done = ollm(env, "greet", "--name", "Ada")
    assert (done.returncode, done.stdout) == (0, "hello, Ada\n"), done.stderr
    # Only the command named was configured.
    assert trace(env) == ["hook", "configure greet", "run greet"]


def test_the_commands_exit_code_is_ollms(env: dict[str, str]) -> None:
    assert ollm(env, "greet", "--fail").returncode == 3


def test_its_own_help_shows_its_arguments(env: dict[str, str]) -> None:
    done = ollm(env, "greet", "--help")
    assert done.returncode == 0
    assert "--name" in done.stdout


def test_a_wrong_argument_gets_the_commands_usage(env: dict[str, str]) -> None:
    done = ollm(env, "greet", "--nmae", "x")
    assert done.returncode == 2
    assert "usage: ollm greet" in done.stderr
    assert "--nmae" in done.stderr


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_async_command_runs_on_the_chosen_backend(env: dict[str, str], backend: str) -> None:
    done = ollm(env, "--backend", backend, "where")
    assert (done.returncode, done.stdout.strip()) == (0, backend), done.stderr


def test_the_built_in_commands_never_set_up_plugin_commands(env: dict[str, str]) -> None:
    done = ollm(env, "chat", "-p", "echo", "hi")
    assert done.returncode == 0, done.stderr
    assert "hello" not in done.stdout
    # The chat's discovery asks the hook (specs cost nothing); nothing of a command runs.
    assert set(trace(env)) <= {"hook"}


def test_a_command_cannot_take_the_name_of_ollms_own(env: dict[str, str]) -> None:
    done = ollm(env, "plugins")
    assert "command 'chat' skipped" in done.stdout


def test_a_command_that_fails_to_configure_is_an_error_in_words(env: dict[str, str]) -> None:
    done = ollm(env, "broken")
    assert done.returncode == 1
    assert "failed to set up its arguments: RuntimeError: no arguments today" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_broken_plugin_does_not_break_help(tmp_path: Path) -> None:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "bad_commands.py").write_text(
        "import ollm\n@ollm.hookimpl\ndef ollm_commands():\n    raise RuntimeError('boom')\n"
    )
    path = installed_plugin(folder, "bad", "bad_commands", folder)
    done = ollm(ollm_env(PYTHONPATH=path), "--help")
    assert done.returncode == 0
    assert "chat" in done.stdout
