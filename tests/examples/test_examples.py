"""The installable examples (examples/*): built and installed as a user would, their own
tests run, and the CLI finding them through their entry points."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import ollm_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("tool-pack", "provider-plugin", "http-provider")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The examples installed (built as wheels) into a folder of their own."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            *(str(ROOT / "examples" / name) for name in EXAMPLES),
        ],
        check=True,
        timeout=300,
    )
    return target


def env_with(site: Path) -> dict[str, str]:
    env = ollm_env(OLLM_LOGS="off")
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_examples_own_tests_pass_when_installed(site: Path, name: str) -> None:
    folder = ROOT / "examples" / name
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(folder),
            "-c",
            str(folder / "pyproject.toml"),
            str(folder / "tests"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env_with(site),
        cwd=folder,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout


def test_the_cli_finds_the_provider_and_the_tools(site: Path) -> None:
    env = env_with(site)
    chat = subprocess.run(
        [sys.executable, "-m", "ollm", "chat", "-p", "pirate", "hello my friend"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.strip() == "ahoy me matey"
    tools = subprocess.run(
        [sys.executable, "-m", "ollm", "tools"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert tools.returncode == 0, tools.stderr
    for name in ("word_count", "change_case", "repeat"):
        assert name in tools.stdout
    models = subprocess.run(
        [sys.executable, "-m", "ollm", "models", "list", "-p", "pirate"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert models.returncode == 0, models.stderr
    assert "pirate-large" in models.stdout


def test_the_http_provider_example_chats_through_the_cli(site: Path) -> None:
    # Written from docs/plugins.md alone, on the public kit: a third party's HTTP provider.
    from ollm_testutils import FakeOpenAIServer, OpenAIReply

    with FakeOpenAIServer() as server:
        server.script(OpenAIReply(["Hello", " from mini"]))
        chat = subprocess.run(
            [sys.executable, "-m", "ollm", "chat", "-p", "mini", "-m", "gpt-test", "hi"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**env_with(site), "MINI_BASE_URL": server.base_url},
            stdin=subprocess.DEVNULL,
        )
        assert chat.returncode == 0, chat.stderr
        assert chat.stdout.strip() == "Hello from mini"
        server.api_key = "sk-right"
        refused = subprocess.run(
            [sys.executable, "-m", "ollm", "chat", "-p", "mini", "-m", "gpt-test", "hi"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**env_with(site), "MINI_BASE_URL": server.base_url, "MINI_API_KEY": "sk-x"},
            stdin=subprocess.DEVNULL,
        )
    assert refused.returncode == 1
    assert refused.stderr.startswith("error[AUTH_FAILED]: The mini server at ")
    assert "Check MINI_API_KEY" in refused.stderr
